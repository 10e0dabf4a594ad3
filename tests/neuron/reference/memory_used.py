"""Runtime group ``memory_used``: host and device memory of each application, and its loaded models.

Reads the app's data blocks (neuron/apps.py): host memory from the ND counters (application_memory = MISC_HOST,
constants, dma_buffers = CODE_HOST, tensors), device memory per core from the NC MEM_USAGE counters, summed per
logical core for ``neuroncore_memory_usage`` (flat core index); the totals are the sums of the breakdowns.
``loaded_models`` come from the model records: one entry per model and device, its subgraphs keyed
``sg_NN`` with the per-subgraph memory grid (host/device x code, tensors, constants, misc). ``is_running`` is
true when the driver lists a NeuronCore locked by the app with that model's uuid (the lock map covers cores 0-3
only), or when a core holding one of its subgraphs was busy since this group's previous collection. Memory is a
gauge: the current value, not a per-period count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from tests.neuron.reference.apps import AppData
from tests.neuron.reference.datablock import ModelNode
from tests.neuron.reference.deltas import MEM_PICK, DeltaTracker, cores_in_use


def _host_breakdown(sizes: tuple[int, ...]) -> dict[str, int]:
    return {
        "application_memory": sizes[L.MEM_SLOT_MISC],
        "constants": sizes[L.MEM_SLOT_CONSTANTS],
        "dma_buffers": sizes[L.MEM_SLOT_CODE],
        "tensors": sizes[L.MEM_SLOT_TENSORS],
    }


def _device_breakdown(sizes: tuple[int, ...]) -> dict[str, int]:
    return {
        "constants": sizes[L.MEM_SLOT_CONSTANTS],
        "model_code": sizes[L.MEM_SLOT_CODE],
        "runtime_memory": sizes[L.MEM_SLOT_MISC],
        "tensors": sizes[L.MEM_SLOT_TENSORS],
    }


def _subgraph(node: ModelNode, device: int, lnc: int) -> dict[str, Any]:
    host = _host_breakdown(node.host)
    dev = _device_breakdown(node.device)
    return {
        "memory_used_bytes": {
            "host": sum(host.values()),
            "neuron_device": sum(dev.values()),
            "usage_breakdown": {"host": host, "neuron_device": dev},
        },
        "neuroncore_index": node.nc_index // lnc,
        "neuron_device_index": device,
    }


def memory_body(
    data: AppData, busy_cores: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset()
) -> dict[str, Any]:
    topo = data.topology
    lnc = max(1, topo.lnc)
    host = dict.fromkeys(("application_memory", "constants", "dma_buffers", "tensors"), 0)
    per_core: dict[int, dict[str, int]] = {}
    models: list[dict[str, Any]] = []
    for index, dd in sorted(data.devices.items()):
        reading = dd.reading
        for name, ctr in L.HOST_MEM_COUNTERS:
            host[name] += reading.nd[ctr]
        for phys in cores_in_use(dd):
            key = index * topo.logical_cores + phys // lnc
            entry = per_core.setdefault(key, dict.fromkeys((n for n, _ in L.DEVICE_MEM_COUNTERS), 0))
            counters = reading.nc[phys]
            for name, ctr in L.DEVICE_MEM_COUNTERS:
                entry[name] += counters[ctr]
        running = set(dd.info.locked_uuids) if not dd.final else set()
        by_model: dict[tuple[int, str], dict[str, Any]] = {}
        for node in sorted(reading.models, key=lambda m: (m.model_id, m.sg_index)):
            if (index, node.nc_index) in busy_cores:
                running.add(node.uuid)
        for node in sorted(reading.models, key=lambda m: (m.model_id, m.sg_index)):
            model = by_model.get((node.model_id, node.uuid))
            if model is None:
                model = by_model[(node.model_id, node.uuid)] = {
                    "name": node.name,
                    "uuid": node.uuid,
                    "model_id": node.model_id,
                    "is_running": node.uuid in running,
                    "subgraphs": {},
                }
            model["subgraphs"][f"sg_{node.sg_index:02d}"] = _subgraph(node, index, lnc)
        models.extend(by_model.values())
    return {
        "neuron_runtime_used_bytes": {
            "host": sum(host.values()),
            "neuron_device": sum(sum(c.values()) for c in per_core.values()),
            "usage_breakdown": {
                "host": host,
                "neuroncore_memory_usage": {str(k): per_core[k] for k in sorted(per_core)},
            },
        },
        "loaded_models": models,
    }


class MemoryUsed(RuntimeGroup):
    type_name = "memory_used"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self._tracker = DeltaTracker()
        self._cache: dict[int, tuple[tuple[Any, ...], dict[str, Any]]] = {}  # pid -> (inputs, body)

    def _body(self, app: App) -> dict[str, Any] | None:
        if not isinstance(app.data, AppData):
            return None
        busy = {
            (dd.device, core)
            for dd in self._tracker.step(app, (L.NC_TIME_IN_USE,))
            if not dd.data.final
            for core, (d_busy,) in dd.deltas.items()
            if d_busy
        }
        key = (
            app.data.topology,
            frozenset(busy),
            tuple(
                (i, dd.final, dd.reading.nd, dd.reading.models, dd.info.locked_uuids,
                 tuple(map(MEM_PICK, dd.reading.nc.values())))
                for i, dd in app.data.devices.items()
            ),
        )  # fmt: skip
        cached = self._cache.get(app.pid)
        if cached is not None and cached[0] == key:
            return cached[1]  # unchanged: the same (never mutated) body
        body = memory_body(app.data, busy)
        self._cache[app.pid] = (key, body)
        return body

    def collect(self, apps: Sequence[App], gone: Sequence[App]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for app in apps:
            body = self._body(app)
            if body is not None:
                out[app.pid] = body
        for app in gone:
            body = self._body(app)
            if body is not None:
                out[app.pid] = body
            self._tracker.forget(app.pid)
            self._cache.pop(app.pid, None)
        return out


GROUP = MemoryUsed
