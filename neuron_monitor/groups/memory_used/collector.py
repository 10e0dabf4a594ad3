"""Runtime group ``memory_used``: host and device memory of each application, and its loaded models.

Reads the app's data blocks (neuron/apps.py): host memory from the ND counters (application_memory = MISC_HOST,
constants, dma_buffers = CODE_HOST, tensors), device memory per core from the NC MEM_USAGE counters, summed per
logical core for ``neuroncore_memory_usage`` (flat core index); the totals are the sums of the breakdowns.
``loaded_models`` come from the model records: one entry per model and device, its subgraphs keyed
``sg_NN`` with the per-subgraph memory grid (host/device x code, tensors, constants, misc). ``is_running`` is
true when the driver lists a NeuronCore locked by the app with that model's uuid (the lock map covers cores 0-3
only), or when a core holding one of its subgraphs was busy since this group's previous collection. Memory is a
gauge: the current value, not a per-period count. The body's keys and types: body.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from neuron_monitor.groups.data_block_group import DataBlockGroup, ImplausibleValue
from neuron_monitor.groups.memory_used import body as B
from neuron_monitor.groups.memory_used.body import (
    CoreMemory,
    HostMemory,
    LoadedModel,
    MemoryUsedBody,
    Subgraph,
    SubgraphDeviceMemory,
)
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.apps import AppData
from neuron_monitor.neuron.datablock import ND_POS, ModelNode, N
from neuron_monitor.neuron.deltas import DeltaTracker, cores_in_use, memory_same
from neuron_monitor.neuron.plausible import MAX_BYTES

_BUSY = (L.NC_TIME_IN_USE,)
_SLOTS = (L.MEM_SLOT_MISC, L.MEM_SLOT_CONSTANTS, L.MEM_SLOT_CODE, L.MEM_SLOT_TENSORS)  # what a breakdown shows


def _shown(sizes: tuple[int, ...]) -> int:
    """The sum of a model record's slots that its breakdown shows (a subgraph's total at one location)."""
    return sum([sizes[slot] for slot in _SLOTS])


def _host_breakdown(sizes: tuple[int, ...]) -> HostMemory:
    return {
        B.HOST_APPLICATION_MEMORY: sizes[L.MEM_SLOT_MISC],
        B.MEMORY_CONSTANTS: sizes[L.MEM_SLOT_CONSTANTS],
        B.HOST_DMA_BUFFERS: sizes[L.MEM_SLOT_CODE],
        B.MEMORY_TENSORS: sizes[L.MEM_SLOT_TENSORS],
    }


def _device_breakdown(sizes: tuple[int, ...]) -> SubgraphDeviceMemory:
    return {
        B.MEMORY_CONSTANTS: sizes[L.MEM_SLOT_CONSTANTS],
        B.MEMORY_MODEL_CODE: sizes[L.MEM_SLOT_CODE],
        B.MEMORY_RUNTIME_MEMORY: sizes[L.MEM_SLOT_MISC],
        B.MEMORY_TENSORS: sizes[L.MEM_SLOT_TENSORS],
    }


def _subgraph(node: ModelNode, device: int, lnc: int) -> Subgraph:
    return {
        B.SUBGRAPH_MEMORY_USED_BYTES: {
            B.LOCATION_HOST: _shown(node.host),
            B.LOCATION_NEURON_DEVICE: _shown(node.device),
            B.USAGE_BREAKDOWN: {
                B.LOCATION_HOST: _host_breakdown(node.host),
                B.LOCATION_NEURON_DEVICE: _device_breakdown(node.device),
            },
        },
        B.SUBGRAPH_NEURONCORE_INDEX: node.nc_index // lnc,
        B.SUBGRAPH_NEURON_DEVICE_INDEX: device,
    }


def memory_body(
    data: AppData, busy_cores: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset()
) -> MemoryUsedBody:
    topo = data.topology
    lnc = max(1, topo.lnc)
    # summed under the category names of neuron/layout.py's counter maps (test_group_bodies: body.py's categories)
    host = dict.fromkeys(B.HOST_MEMORY_CATEGORIES, 0)
    per_core: dict[int, dict[str, int]] = {}
    models: list[LoadedModel] = []
    for index, dd in sorted(data.devices.items()):
        reading = dd.reading
        for name, ctr in L.HOST_MEM_COUNTERS:
            host[name] += reading.nd_values[ND_POS[ctr]]
        counters = reading.counters
        for phys in cores_in_use(dd):
            key = index * topo.logical_cores + phys // lnc
            entry = per_core.setdefault(key, dict.fromkeys((n for n, _ in L.DEVICE_MEM_COUNTERS), 0))
            base = phys * N
            for name, ctr in L.DEVICE_MEM_COUNTERS:
                entry[name] += counters[base + ctr]
        running = set(dd.info.locked_uuids) if not dd.final else set()
        by_model: dict[tuple[int, str], LoadedModel] = {}
        for node in sorted(reading.models, key=lambda m: (m.model_id, m.sg_index)):
            if (index, node.nc_index) in busy_cores:
                running.add(node.uuid)
        for node in sorted(reading.models, key=lambda m: (m.model_id, m.sg_index)):
            model = by_model.get((node.model_id, node.uuid))
            if model is None:
                model = by_model[(node.model_id, node.uuid)] = {
                    B.MODEL_NAME: node.name,
                    B.MODEL_UUID: node.uuid,
                    B.MODEL_ID: node.model_id,
                    B.MODEL_IS_RUNNING: node.uuid in running,
                    B.MODEL_SUBGRAPHS: {},
                }
            model[B.MODEL_SUBGRAPHS][f"sg_{node.sg_index:02d}"] = _subgraph(node, index, lnc)
        models.extend(by_model.values())
    host_total = sum(host.values())
    device_total = sum(sum(c.values()) for c in per_core.values())
    if host_total > MAX_BYTES or device_total > MAX_BYTES:
        raise ImplausibleValue(_implausible(f"host {host_total}, device {device_total}"))
    for model in models:
        for name, sg in model[B.MODEL_SUBGRAPHS].items():
            used = sg[B.SUBGRAPH_MEMORY_USED_BYTES]
            sg_host, sg_device = used[B.LOCATION_HOST], used[B.LOCATION_NEURON_DEVICE]
            if sg_host > MAX_BYTES or sg_device > MAX_BYTES:
                what = f"model {model[B.MODEL_ID]} {name}: host {sg_host}, device {sg_device}"
                raise ImplausibleValue(_implausible(what))
    # host and per_core hold exactly body.py's categories (the layout's names, checked by test_group_bodies)
    return {
        B.NEURON_RUNTIME_USED_BYTES: {
            B.LOCATION_HOST: host_total,
            B.LOCATION_NEURON_DEVICE: device_total,
            B.USAGE_BREAKDOWN: {
                B.LOCATION_HOST: cast("HostMemory", host),
                B.NEURONCORE_MEMORY_USAGE: {str(k): cast("CoreMemory", per_core[k]) for k in sorted(per_core)},
            },
        },
        B.LOADED_MODELS: models,
    }


def _implausible(what: str) -> str:
    return (
        f"memory past what the hardware holds ({what} bytes; at most {MAX_BYTES} each): the data block is damaged "
        "or forged; left out of this period"
    )


# What a body was computed from, per device in the app's order: (index, final, the host-memory ND counters, the
# models, the locked model uuids, the reading's flat counters); only the device memory counters of the last are
# compared (`memory_same`).
_DeviceInputs = tuple[int, bool, tuple[int, ...], tuple[Any, ...], tuple[str, ...], Sequence[int]]


class MemoryUsed(DataBlockGroup):
    type_name = "memory_used"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root, DeltaTracker(_BUSY))
        # pid -> (topology, busy flags, the inputs of each device, the body made from them)
        self._cache: dict[int, tuple[Any, tuple[Any, ...], tuple[_DeviceInputs, ...], dict[str, Any]]] = {}

    def _body(self, app: App) -> dict[str, Any] | None:
        data = app.data
        if not isinstance(data, AppData):
            return None
        steps = self._tracker.step(app)
        # which cores were busy since the last collection: (device, flag per core), finished devices left out
        busy_flags = tuple((device, tuple(map(bool, deltas))) for device, dd, _dt, _n, deltas in steps if not dd.final)
        return self.body_after_step(app.pid, data, busy_flags)

    def body_after_step(
        self, pid: int, data: AppData, busy_flags: tuple[tuple[int, tuple[bool, ...]], ...], same: bool | None = None
    ) -> dict[str, Any]:
        """`_body` once the delta step gave ``busy_flags``: the cached body while nothing it was made from changed,
        else a new one (cached). ``same``: whether the device memory counters of a one-device application equal
        those of the cached body's reading, when the caller has compared them already (groups/application.py)."""
        cached = self._cache.get(pid)
        if cached is not None:
            topology, flags, inputs, body = cached
            same_topology = topology is data.topology or topology == data.topology
            if same_topology and flags == busy_flags and _same_inputs(inputs, data, same):
                return body  # unchanged: the same (never mutated) body
        busy = {(device, core) for device, flags in busy_flags for core, flag in enumerate(flags) if flag}
        body = dict(memory_body(data, busy))  # a MemoryUsedBody (body.py)
        inputs = tuple(
            (i, dd.final, dd.reading.nd_values, dd.reading.models, dd.info.locked_uuids, dd.reading.counters)
            for i, dd in data.devices.items()
        )
        self._cache[pid] = (data.topology, busy_flags, inputs, body)
        return body

    def _forget(self, pid: int) -> None:
        super()._forget(pid)
        self._cache.pop(pid, None)


def _same_inputs(inputs: tuple[_DeviceInputs, ...], data: AppData, same: bool | None = None) -> bool:
    """True when every device of ``data`` holds what ``inputs`` recorded (the same devices in the same order, and
    for each the same final flag, host-memory counters, models, locked uuids and device memory counters; ``same``,
    when given for a one-device application, is the comparison of the last)."""
    devices = data.devices
    if len(inputs) != len(devices):
        return False
    for (index, final, nd, models, locked, counters), (i, dd) in zip(inputs, devices.items(), strict=True):
        reading = dd.reading
        if index != i or final != dd.final or nd != reading.nd_values or models != reading.models:
            return False
        if locked != dd.info.locked_uuids:
            return False
        if not (same if same is not None and len(inputs) == 1 else memory_same(reading.counters, counters)):
            return False
    return True


GROUP = MemoryUsed
