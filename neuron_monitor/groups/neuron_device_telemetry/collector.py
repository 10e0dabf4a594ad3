"""System group ``neuron_device_telemetry``: what the Neuron driver exposes per device and core that no runtime
reports: power, health, repairable ECC, memory by category, core busy time and execution status counts.

Per device, under the driver's sysfs tree (``neuronN/stats``, or ``neuronN/metrics/stats`` before driver 2.8;
every file opened through the RootFS, inside ``--root``):

- ``power/utilization`` (status, roll-up time, min/max/avg percent; NO_DATA and INVALID carry no percentages);
- ``hardware/health_status/unhealthy_components`` (driver >= 2.30.2; empty when healthy);
- ``hardware/mem_ecc_repairable_uncorrected`` (per-period count by the counter rule, util/counters.py);
- ``memory_usage/host_mem/<category>/{total,peak}`` and, per physical core,
  ``neuron_coreK/stats/memory_usage/device_mem/<category>/{total,peak}`` (bytes now and high-water mark);
- per physical core ``other_info/nc_time_in_use/total`` (microseconds busy, every process on the core) and
  ``status/<counter>/total`` (executions by outcome), both reported as per-period amounts.

Cores are reported as the runtimes number them: logical NeuronCores (LNC physical cores each), busy ratio the
mean of their physical cores', memory their sum. Before driver 2.30.2 the driver adds a process's core counters
to sysfs only when the process exits, so the busy ratio is not reported then (``error`` says why) and the
status counts arrive at the exit. Whatever file is missing is named in ``error``; the rest is still reported.

Cost: the files are found once per device listing (and again after any read failure); each collection reads
every numeric file with one pread on its kept descriptor, in one pass, then builds the body (its keys and types:
body.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from neuron_monitor.groups.base import SystemGroup
from neuron_monitor.groups.neuron_device_telemetry import body as B
from neuron_monitor.groups.neuron_device_telemetry.body import (
    CoreTelemetry,
    DeviceTelemetry,
    NeuronDeviceTelemetryBody,
    Power,
)
from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron import nodes as NODES
from neuron_monitor.neuron.hardware import read_topology
from neuron_monitor.neuron.nodes import CORE_DIR, Node
from neuron_monitor.neuron.plausible import CORE_BUSY_US, CORE_STATUS, ECC_SOURCES, MAX_BYTES
from neuron_monitor.neuron.sysfs import DriverTree
from neuron_monitor.neuron.telemetry_files import parse_counter, parse_counters, parse_power, parse_unhealthy_components
from neuron_monitor.util.counters import Source, step
from neuron_monitor.util.errors import GroupError
from neuron_monitor.util.ranges import device_ranges

T = TypeVar("T")

_READ_SIZE = 64
UNLINK_CHECKS = 16  # kept files checked for removal per collection (a few microseconds)
LIVE_CORE_COUNTERS = (2, 30, 2)  # from this driver on, core counters are live (before: added at process exit)

# what a numeric file feeds: (kind, device, physical core or -1, name, field)
_Slot = tuple[str, int, int, str, str]
_HOST_MEM, _DEV_MEM, _STATUS, _BUSY, _ECC = "host_mem", "device_mem", "status", "busy", "ecc"


@dataclass
class _Plan:
    devices: tuple[int, ...]
    lnc: int
    phys: int
    live: bool
    files: list[KeptFile] = field(default_factory=list)
    slots: list[_Slot] = field(default_factory=list)
    power: dict[int, KeptFile] = field(default_factory=dict)
    health: dict[int, KeptFile] = field(default_factory=dict)
    missing: dict[str, list[int]] = field(default_factory=dict)  # what is not exposed -> devices

    def close(self) -> None:
        for f in (*self.files, *self.power.values(), *self.health.values()):
            f.close()


def _listdir(root: RootFS, rel: str) -> list[str]:
    try:
        return sorted(root.listdir(rel))
    except OSError:
        return []


def _parse_each(
    files: dict[int, KeptFile], parse: Callable[[bytes], T], what: str, errors: list[str]
) -> tuple[dict[int, T], bool]:
    """Each device's file read and parsed: (device -> value, False when a file could not be read). A file that
    cannot be read or parsed is named in ``errors`` (as ``what`` of ``neuron_device N``) and left out."""
    out: dict[int, T] = {}
    read = True
    for device, f in files.items():
        try:
            out[device] = parse(f.read())
        except OSError as e:
            errors.append(f"{what} of neuron_device {device}: {e.strerror}")
            read = False
        except ValueError as e:
            errors.append(f"{what} of neuron_device {device}: {e}")
    return out, read


class NeuronDeviceTelemetry(SystemGroup):
    type_name = "neuron_device_telemetry"

    def __init__(self, root: RootFS) -> None:
        super().__init__(root)
        self.tree = DriverTree(root)
        self._plan: _Plan | None = None
        self._prev: dict[_Slot, int] = {}
        self._check_at = 0  # where `_unlinked` looks next

    # -- finding the files ----------------------------------------------------------------------------------
    def _make_plan(self, devices: tuple[int, ...]) -> _Plan:
        try:
            topo = read_topology(self.root)
            lnc, phys = topo.lnc, topo.phys_cores
        except (OSError, ValueError):
            lnc, phys = 1, 0
        version = self.tree.driver_version()
        plan = _Plan(devices, lnc, phys, live=version is not None and version >= LIVE_CORE_COUNTERS)
        for device in devices:
            self._plan_device(plan, device)
        return plan

    def _add(self, plan: _Plan, rel: str, slot: _Slot) -> bool:
        """Keep the numeric file ``rel`` (opened now: `_read_numbers` reads it at once) for ``slot``; False when
        it does not exist."""
        kept = self.root.open_kept_if_exists(rel, _READ_SIZE)
        if kept is None:
            return False
        plan.files.append(kept)
        plan.slots.append(slot)
        return True

    def _find(self, plan: _Plan, device: int, node: Node, core: int = -1) -> str | None:
        """Where ``node`` of ``device`` (of physical core ``core``) is; None when not found, which is recorded in
        ``plan.missing`` under the node's family unless the node has a problem of its own (two candidates: named
        by `DriverTree.problems`)."""
        found = self.tree.find(device, node, core)
        if found.rel is None and not found.problem:
            devices = plan.missing.setdefault(node.family, [])
            if device not in devices:
                devices.append(device)
        return found.rel

    def _plan_device(self, plan: _Plan, device: int) -> None:
        root = self.root
        missing = plan.missing
        for node, kept in ((NODES.POWER_UTILIZATION, plan.power), (NODES.UNHEALTHY_COMPONENTS, plan.health)):
            rel = self._find(plan, device, node)
            if rel is not None:
                kept[device] = root.open_kept(rel, 256)
        ecc = self._find(plan, device, NODES.MEM_ECC_REPAIRABLE)
        if ecc is not None and not self._add(plan, ecc, (_ECC, device, -1, B.REPAIRABLE_ECC, "")):
            missing.setdefault(NODES.MEM_ECC_REPAIRABLE.family, []).append(device)
        host = self._find(plan, device, NODES.HOST_MEM)
        categories = [c for c in _listdir(root, host) if root.is_dir(f"{host}/{c}")] if host is not None else []
        if host is not None and not categories:
            missing.setdefault(NODES.HOST_MEM.family, []).append(device)
        for cat in categories:
            for fld in ("total", "peak"):
                if not self._add(plan, f"{host}/{cat}/{fld}", (_HOST_MEM, device, -1, cat, fld)):
                    missing.setdefault(f"memory_usage/host_mem/{cat}/{fld}", []).append(device)
        phys = plan.phys or self._count_cores(device)
        for core in range(phys):
            busy = self._find(plan, device, NODES.CORE_BUSY, core)
            if busy is not None and not self._add(plan, busy, (_BUSY, device, core, "", "")):
                missing.setdefault(NODES.CORE_BUSY.family, []).append(device)
            dmem = self._find(plan, device, NODES.CORE_DEVICE_MEM, core)
            cats = [c for c in _listdir(root, dmem) if root.is_dir(f"{dmem}/{c}")] if dmem is not None else []
            if dmem is not None and not cats and core == 0:
                missing.setdefault(NODES.CORE_DEVICE_MEM.family, []).append(device)
            for cat in cats:
                for fld in ("total", "peak"):
                    if not self._add(plan, f"{dmem}/{cat}/{fld}", (_DEV_MEM, device, core, cat, fld)):
                        missing.setdefault(f"memory_usage/device_mem/{cat}/{fld}", []).append(device)
            status = self._find(plan, device, NODES.CORE_STATUS, core)
            for counter in _listdir(root, status) if status is not None else ():
                if not self._add(plan, f"{status}/{counter}/total", (_STATUS, device, core, counter, "")):
                    missing.setdefault(f"status/{counter}/total", []).append(device)
        plan.phys = plan.phys or phys

    def _count_cores(self, device: int) -> int:
        """Physical cores of ``device`` when the topology did not say: ``neuron_coreK`` directories where the
        known layout puts them, else where the device's search found them."""
        nodes = self.tree.nodes(device)
        layout = nodes.layout
        if layout is not None:
            parent = f"{nodes.rel}/{layout.cores}" if layout.cores else nodes.rel
            count = sum(1 for n in _listdir(self.root, parent) if CORE_DIR.match(n))
            if count:
                return count
        return len(nodes.cores())

    # -- reading ----------------------------------------------------------------------------------------------
    def _current_plan(self) -> _Plan:
        devices = self.tree.device_indexes()
        if not devices:
            raise GroupError("no Neuron devices found (is the Neuron driver loaded?)")
        plan = self._plan
        if plan is None or plan.devices != devices:
            if plan is not None:
                plan.close()
            plan = self._plan = self._make_plan(devices)
        return plan

    def _read_numbers(self, plan: _Plan) -> tuple[list[int | None], bool, list[str]]:
        """Every numeric file: one pread each in one pass, parsed together (`parse_counters`); per file, carefully,
        when anything is unusual. Returns the values (None for a file not read or not a counter), whether every
        file was read, and an error naming each bad file. A file removed under a kept descriptor (a tree of regular
        files; sysfs files are not removed one by one) is noticed by `_unlinked`, a few files per collection."""
        pread = os.pread
        gone = self._unlinked(plan)
        if gone is None:
            try:
                raws = [pread(f.fileno(), _READ_SIZE, 0) for f in plan.files]
                parsed = parse_counters(raws, _READ_SIZE)  # None for anything unusual, a long file too
                if parsed is not None:
                    return cast("list[int | None]", parsed), True, []
            except (OSError, ValueError):
                pass
        values: list[int | None] = []
        ok = gone is None
        errors: list[str] = []
        for i, f in enumerate(plan.files):
            if gone is not None and i in gone:
                values.append(None)
                errors.append(f"{self._rel(f)}: removed")
                continue
            try:
                values.append(parse_counter(f.read()))
            except OSError as e:
                values.append(None)
                errors.append(f"{self._rel(f)}: {e.strerror or e}")
                ok = False
            except ValueError as e:
                values.append(None)
                errors.append(f"{self._rel(f)}: {e}")
        return values, ok, errors

    def _rel(self, f: KeptFile) -> str:
        """A kept file's path below the root, for an error."""
        try:
            return str(f.path.relative_to(self.root.path("")))
        except ValueError:
            return str(f.path)

    def _unlinked(self, plan: _Plan) -> set[int] | None:
        """The indexes of the files, among the next few of the rotation (`UNLINK_CHECKS` per collection), whose
        kept descriptor points at a removed file; None when none does."""
        files = plan.files
        if not files:
            return None
        start = self._check_at % len(files)
        found: set[int] = set()
        for i in range(start, min(start + UNLINK_CHECKS, len(files))):
            try:
                if os.fstat(files[i].fileno()).st_nlink == 0:
                    found.add(i)
            except OSError:
                found.add(i)
        self._check_at = start + UNLINK_CHECKS
        return found or None

    def prime(self) -> None:
        try:
            plan = self._current_plan()
        except GroupError:
            return
        values, _, _ = self._read_numbers(plan)
        self._last_collect = time.monotonic()
        baselines = ((s, _baseline(s, v)) for s, v in zip(plan.slots, values, strict=True))
        self._prev = {s: v for s, v in baselines if v is not None}

    def collect(self) -> dict[str, Any]:
        plan = self._current_plan()
        values, ok, errors = self._read_numbers(plan)
        entries: dict[int, DeviceTelemetry] = {d: {B.DEVICE_INDEX: d} for d in plan.devices}
        ok = self._power_and_health(plan, entries, errors) and ok
        self._numbers(plan, values, entries, errors)
        if not ok:  # a file went away or held something odd: find the files again next time (moved, maybe)
            plan.close()
            self._plan = None
            self.tree.forget()
        for name, devices in plan.missing.items():
            errors.append(f"{name} not exposed by the driver for neuron_device {device_ranges(sorted(devices))}")
        errors += self.tree.problems(plan.devices)
        body: NeuronDeviceTelemetryBody = {B.NEURON_DEVICES: list(entries.values())}
        if errors:
            body[B.ERROR] = "; ".join(errors)
        return cast("dict[str, Any]", body)  # SystemGroup.collect's plain dict (no copy)

    @staticmethod
    def _power_and_health(plan: _Plan, entries: dict[int, DeviceTelemetry], errors: list[str]) -> bool:
        """Power and health of each device; False when a file could not be read (look for the files again)."""
        powers, power_read = _parse_each(plan.power, parse_power, "power/utilization", errors)
        for device, p in powers.items():
            power: Power = {B.STATUS: p.status, B.SAMPLE_TIME: p.sample_time}
            low, high, avg = p.min_percent, p.max_percent, p.avg_percent
            if low is not None and high is not None and avg is not None:  # VALID (parse_power: all three or none)
                power.update({B.MIN: low, B.MAX: high, B.AVG: avg})
            entries[device][B.POWER] = power
        healths, health_read = _parse_each(plan.health, parse_unhealthy_components, "unhealthy_components", errors)
        for device, components in healths.items():
            entries[device][B.HEALTHY] = not components
            entries[device][B.UNHEALTHY_COMPONENTS] = components
        return power_read and health_read

    def _numbers(
        self, plan: _Plan, values: list[int | None], entries: dict[int, DeviceTelemetry], errors: list[str]
    ) -> None:
        prev, now = self._prev, {}
        lnc = max(1, plan.lnc)
        logical = max(1, plan.phys // lnc)
        busy_us: dict[tuple[int, int], list[int]] = {}
        period_us = self._period_us()
        dt = (period_us or 0.0) / 1e6
        for i, (slot, value) in enumerate(zip(plan.slots, values, strict=True)):
            if value is None:
                continue
            kind, device, phys, name, fld = slot
            entry = entries[device]
            if kind in (_HOST_MEM, _DEV_MEM) and value > MAX_BYTES:
                errors.append(f"{self._rel(plan.files[i])}: {value} bytes, past what the hardware holds; left out")
                continue
            if kind in (_HOST_MEM, _DEV_MEM):
                now[slot] = value
                if kind == _HOST_MEM:
                    amounts = entry.setdefault(B.HOST_MEMORY, {}).setdefault(name, {})
                else:
                    amounts = entry.setdefault(B.DEVICE_MEMORY, {}).setdefault(name, {})
                    core = _core_entry(entry, device, phys, lnc, logical)
                    core_amounts = core.setdefault(B.DEVICE_MEMORY, {}).setdefault(name, {})
                    if fld == "total":  # a physical core's bytes summed into its logical core's
                        core_amounts[B.USED] = core_amounts.get(B.USED, 0) + value
                    else:
                        core_amounts[B.PEAK] = core_amounts.get(B.PEAK, 0) + value
                if fld == "total":  # the category's total file: bytes now; its peak file: the high-water mark
                    amounts[B.USED] = amounts.get(B.USED, 0) + value
                else:
                    amounts[B.PEAK] = amounts.get(B.PEAK, 0) + value
                continue
            delta, baseline, problem = step(prev.get(slot), value, dt, _source(slot))
            if baseline is not None:
                now[slot] = baseline
            if problem is not None:
                errors.append(f"{self._rel(plan.files[i])}: {problem}")
            if delta is None:
                if baseline is None:  # refused, or a drop to the driver's failure value: no count
                    continue
                delta = 0  # a new baseline: nothing counted yet
            if kind == _ECC:
                entry[B.ECC] = {B.REPAIRABLE_ECC: delta}  # the one ECC slot of a device
            elif kind == _STATUS:
                status = _core_entry(entry, device, phys, lnc, logical).setdefault(B.EXECUTION_STATUS, {})
                status[name] = status.get(name, 0) + delta
            else:  # _BUSY
                busy_us.setdefault((device, phys // lnc), []).append(delta)
        self._prev = now
        if busy_us and not plan.live:
            errors.append(
                "busy_ratio not reported: before driver 2.30.2 nc_time_in_use is updated only at process exit"
            )
            return
        for (device, lcore), deltas in busy_us.items():
            if period_us is None:
                break
            core = _core_entry(entries[device], device, lcore * lnc, lnc, logical)
            core[B.BUSY_RATIO] = round(min(1.0, sum(deltas) / len(deltas) / period_us), 6)

    _last_collect: float | None = None

    def _period_us(self) -> float | None:
        """Microseconds since the previous collection (None at the first one, which has no baseline)."""
        now = time.monotonic()
        last, self._last_collect = self._last_collect, now
        if last is None or now <= last:
            return None
        return (now - last) * 1e6

    def sources(self) -> dict[str, Any]:
        return self.tree.sources()

    def close(self) -> None:
        if self._plan is not None:
            self._plan.close()
            self._plan = None


def _source(slot: _Slot) -> Source:
    """What the counter of ``slot`` can do (neuron/plausible.py)."""
    kind = slot[0]
    if kind == _ECC:
        return ECC_SOURCES[slot[3]]
    return CORE_STATUS if kind == _STATUS else CORE_BUSY_US


def _baseline(slot: _Slot, value: int | None) -> int | None:
    """``value`` as the baseline of ``slot``: memory figures as they are, a counter past its top not at all."""
    if value is None or slot[0] in (_HOST_MEM, _DEV_MEM):
        return value
    return step(None, value, 0.0, _source(slot))[1]


def _core_entry(entry: DeviceTelemetry, device: int, phys: int, lnc: int, logical: int) -> CoreTelemetry:
    cores = entry.setdefault(B.NEURONCORES, {})
    key = str(device * logical + phys // lnc)
    core = cores.get(key)
    if core is None:
        core = cores[key] = {}
    return core


GROUP = NeuronDeviceTelemetry
