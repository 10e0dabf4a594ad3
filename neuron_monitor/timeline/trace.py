"""Snapshots (+ detected problems) -> Trace Event Format events: the tracks of the timeline and where they go.

Tracks, per instance:

- per NeuronCore: ``utilization`` (percent) and ``flops`` counters, summed over the runtimes on the core, and
  ``physical utilization`` (percent per physical core of a logical core: LNC=2 on trn2 and trn3);
- per device: ``memory`` by category (constants, model_code, model_shared_scratchpad, runtime_memory, tensors)
  summed over its cores and runtimes, one counter with a value per category (stacked in chrome://tracing, one
  track per category in Perfetto);
- per runtime: ``executions/s`` (completed, failed), ``latency ms`` (p50, p99 of total latency), ``vCPU %``
  (user, system), ``host memory`` counters; a slice for its lifetime; one slice per error episode (from
  ``detect``), on one thread per error type, with the counts in args;
- per device: uncorrected-ECC slices;
- host: ``vCPU %`` (average usage by mode) and ``memory`` (used, total, swap used) counters.

Period rates (utilization, flops, executions, latency, vCPU) are placed at the start of the period they describe
and written only when their group is fresh; gauges (memory) are written whenever they change. When a runtime
vanishes its counters drop to 0 at the last report it was in.

Grouping (``--group-by``, as the Neuron Explorer system trace viewer) decides which trace process a track is in:
``instance`` (default): one process per instance holding everything; ``device``: one process per device (its
cores, memory, ECC, and the runtimes working on it) plus one per instance for the host and runtime counters;
``neuroncore``: one process per NeuronCore (utilization, flops, its memory by category, the runtimes on it) plus
one per instance; ``process``: one process per runtime (its counters, its own cores and memory) plus one per
instance for the host, device totals and ECC.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.schema.spec import CORE_TRACK, DEVICE_TRACK
from neuron_monitor.timeline.detect import Problem, clock
from neuron_monitor.timeline.extract import ECC_UNCORRECTED, MEMORY_CATEGORIES, Runtime, Snapshot
from neuron_monitor.timeline.selection import ERROR_TYPES, Selection, format_cores
from neuron_monitor.timeline.trace_writer import TraceWriter

GROUP_BY: tuple[str, ...] = ("instance", "device", "neuroncore", "process")
PHYSICAL = "neuroncore_physical_utilization"  # the track category of per-physical-core utilization
ERROR_COLOR = "terrible"  # chrome://tracing reserved colour name (red)
PROBLEM_COLOR = "terrible"


@dataclass
class _RuntimeTracks:
    runtime: Runtime
    first_seen: float
    last_seen: float
    counters: set[tuple[int, str, tuple[str, ...], str]] = field(default_factory=set)  # (pid, name, keys, cat)


@dataclass
class _Instance:
    ordinal: int
    name: str
    instance_type: str
    last_time: float = 0.0
    cores_per_device: int = 1
    runtimes: dict[tuple[int, str], _RuntimeTracks] = field(default_factory=dict)
    lifetimes: list[tuple[_RuntimeTracks, float]] = field(default_factory=list)  # (tracks, end) of finished ones
    core_tracks: dict[int, tuple[int, str, tuple[str, ...]]] = field(default_factory=dict)
    memory_tracks: dict[Hashable, tuple[int, str, tuple[str, ...]]] = field(default_factory=dict)
    flops_cores: set[int] = field(default_factory=set)


@dataclass
class _Slice:
    start: float
    end: float
    name: str
    cat: str
    args: dict[str, Any]
    cname: str = ""


@dataclass
class _Thread:
    name: str
    order: int
    slices: list[_Slice] = field(default_factory=list)


def _r(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


class TraceConverter:
    def __init__(self, writer: TraceWriter, selection: Selection | None = None, group_by: str = "instance") -> None:
        if group_by not in GROUP_BY:
            raise ValueError(f"unknown grouping {group_by!r} (one of: {', '.join(GROUP_BY)})")
        self.w = writer
        self.sel = selection or Selection()
        self.group_by = group_by
        self._instances: dict[str, _Instance] = {}
        self.first_time: float | None = None
        self.last_time: float | None = None

    # -- where things go ------------------------------------------------------------------------------------

    def _main(self, inst: _Instance) -> int:
        label = f"{inst.name} ({inst.instance_type})" if inst.instance_type else inst.name
        name = label if self.group_by == "instance" else f"{label} host"
        return self.w.process(("instance", inst.name), name, inst.ordinal * 1_000_000, inst.instance_type)

    def _device_pid(self, inst: _Instance, dev: int) -> int:
        return self.w.process(("device", inst.name, dev), f"{inst.name} ND {dev}", inst.ordinal * 1_000_000 + 1 + dev)

    def _core_pid(self, inst: _Instance, core: int) -> int:
        return self.w.process(("core", inst.name, core), f"{inst.name} NC {core}", inst.ordinal * 1_000_000 + 1 + core)

    def _runtime_pid(self, inst: _Instance, rt: Runtime) -> int:
        return self.w.process(
            ("runtime", inst.name, rt.key),
            f"{inst.name} {rt.name}",
            inst.ordinal * 1_000_000 + 1 + min(rt.pid, 999_998),
        )

    def _core_place(self, inst: _Instance, core: int) -> tuple[int, str]:
        """(pid, name prefix) of a NeuronCore's tracks in the summed (non-process) groupings."""
        if self.group_by == "neuroncore":
            return self._core_pid(inst, core), ""
        if self.group_by == "device":
            return self._device_pid(inst, core // inst.cores_per_device), f"NC {core} "
        return self._main(inst), f"NC {core} "

    def _device_place(self, inst: _Instance, dev: int) -> tuple[int, str]:
        if self.group_by == "device":
            return self._device_pid(inst, dev), ""
        return self._main(inst), f"ND {dev} "

    def _runtime_pids(self, inst: _Instance, rt: Runtime, cores: tuple[int, ...]) -> list[int]:
        """The trace processes a runtime's slices go to."""
        if self.group_by == "process":
            return [self._runtime_pid(inst, rt)]
        chosen = [c for c in cores if self.sel.wants_core(c)]
        if self.group_by == "device" and chosen:
            return [self._device_pid(inst, d) for d in sorted({c // inst.cores_per_device for c in chosen})]
        if self.group_by == "neuroncore" and chosen:
            return [self._core_pid(inst, c) for c in chosen]
        return [self._main(inst)]

    # -- feeding --------------------------------------------------------------------------------------------

    def _instance(self, snap: Snapshot) -> _Instance:
        inst = self._instances.get(snap.instance)
        if inst is None:
            inst = self._instances[snap.instance] = _Instance(
                len(self._instances) + 1, snap.instance, snap.instance_type
            )
        inst.cores_per_device = snap.cores_per_device
        if snap.instance_type:
            inst.instance_type = snap.instance_type
        return inst

    def _counter(
        self, owner: _RuntimeTracks | None, pid: int, name: str, t: float, values: dict[str, Any], cat: str
    ) -> None:
        self.w.counter(pid, name, t, values, cat)
        if owner is not None:
            owner.counters.add((pid, name, tuple(values), cat))

    def feed(self, snap: Snapshot) -> None:
        if not self.sel.wants_instance(snap.instance):
            return
        if self.first_time is None:
            self.first_time = snap.time
        self.last_time = snap.time
        inst = self._instance(snap)
        runtimes = [rt for rt in snap.runtimes if self.sel.wants_any_core(rt.cores)]
        present = {rt.key for rt in runtimes}
        for key in [k for k in inst.runtimes if k not in present]:
            self._runtime_gone(inst, inst.runtimes.pop(key))
        for rt in runtimes:
            tracks = inst.runtimes.get(rt.key)
            if tracks is None:
                periods = [rt.core_period, rt.vcpu_period, rt.execution.period if rt.execution else None]
                start = snap.time - max([p for p in periods if p] or [0.0])
                first = max(start, inst.last_time)
                tracks = inst.runtimes[rt.key] = _RuntimeTracks(rt, first_seen=first, last_seen=snap.time)
            tracks.runtime = rt
            tracks.last_seen = snap.time
            self._runtime_counters(inst, snap, tracks)
        if self.group_by != "process":
            self._core_counters(inst, snap, runtimes)
            self._memory_counters(inst, snap, runtimes)
        else:
            self._process_memory(inst, snap, runtimes)
        self._host_counters(inst, snap)
        self._spec_counters(inst, snap)
        inst.last_time = snap.time

    def _spec_counters(self, inst: _Instance, snap: Snapshot) -> None:
        """Tracks of groups whose spec declares its timeline values, each at its scope's place."""
        for owner, (track, key, values) in snap.tracks:
            if not self.sel.wants_type(track.category):
                continue
            if track.scope == CORE_TRACK and key and key[0].isdigit():
                core = int(key[0])
                if not self.sel.wants_core(core):
                    continue
                pid, prefix = self._core_place(inst, core)
            elif track.scope == DEVICE_TRACK and key and key[0].isdigit():
                pid, prefix = self._device_place(inst, int(key[0]))
            else:
                pid, prefix = self._main(inst), f"{owner} " if owner else ""
            self.w.counter(pid, f"{prefix}{track.name}", snap.time, dict(values), track.category)

    def _runtime_counters(self, inst: _Instance, snap: Snapshot, tracks: _RuntimeTracks) -> None:
        rt = tracks.runtime
        per_process = self.group_by == "process"
        pid = self._runtime_pid(inst, rt) if per_process else self._main(inst)
        prefix = "" if per_process else f"{rt.name} "
        ex = rt.execution
        if ex is not None and ex.period > 0:
            start = snap.time - ex.period
            if self.sel.wants_type("executions"):
                failed = ex.executions - ex.completed + ex.errors.get("failed_to_queue", 0)
                values: dict[str, float | None] = {
                    "completed": round(ex.completed / ex.period, 3),
                    "failed": round(failed / ex.period, 3),
                }
                self._counter(tracks, pid, f"{prefix}executions/s", start, values, "executions")
            if self.sel.wants_type("latency") and ex.latency_p50 is not None:
                values = {"p50": _r(ex.latency_p50 * 1e3, 4), "p99": _r((ex.latency_p99 or 0.0) * 1e3, 4)}
                self._counter(tracks, pid, f"{prefix}latency ms", start, values, "latency")
        if rt.vcpu is not None and rt.vcpu_period is not None and self.sel.wants_type("runtime_vcpu"):
            values = {"user": round(rt.vcpu[0], 2), "system": round(rt.vcpu[1], 2)}
            self._counter(tracks, pid, f"{prefix}vCPU %", snap.time - rt.vcpu_period, values, "runtime_vcpu")
        if rt.host_memory is not None and self.sel.wants_type("runtime_host_memory"):
            self._counter(
                tracks, pid, f"{prefix}host memory", snap.time, {"bytes": rt.host_memory}, "runtime_host_memory"
            )
        if per_process and rt.utilization is not None and rt.core_period is not None:
            start = snap.time - rt.core_period
            for core in sorted(rt.utilization):
                if not self.sel.wants_core(core):
                    continue
                if self.sel.wants_type("neuroncore_utilization"):
                    values = {"percent": round(rt.utilization[core], 2)}
                    self._counter(tracks, pid, f"NC {core} utilization", start, values, "neuroncore_utilization")
                if self.sel.wants_type("flops") and rt.flops and core in rt.flops:
                    self._counter(tracks, pid, f"NC {core} flops", start, {"flops": rt.flops[core]}, "flops")

    def _core_counters(self, inst: _Instance, snap: Snapshot, runtimes: list[Runtime]) -> None:
        want_util = self.sel.wants_type("neuroncore_utilization")
        want_flops = self.sel.wants_type("flops")
        want_physical = self.sel.wants_type(PHYSICAL)
        if not (want_util or want_flops or want_physical):
            return
        util: dict[int, float] = {}
        flops: dict[int, float] = {}
        physical: dict[int, dict[str, float]] = {}
        start: dict[int, float] = {}  # cores with fresh data -> start of the period
        for rt in runtimes:
            for core, u in (rt.utilization or {}).items():
                if not self.sel.wants_core(core):
                    continue
                util[core] = util.get(core, 0.0) + u
                if rt.flops and core in rt.flops:
                    flops[core] = flops.get(core, 0.0) + rt.flops[core]
                for name, pu in (rt.physical or {}).get(core, {}).items():
                    phys = physical.setdefault(core, {})
                    phys[name] = phys.get(name, 0.0) + pu
                if rt.core_period is not None:
                    start[core] = min(start.get(core, snap.time), snap.time - rt.core_period)
        for core in sorted(start):
            pid, prefix = self._core_place(inst, core)
            if want_util:
                self.w.counter(
                    pid,
                    f"{prefix}utilization",
                    start[core],
                    {"percent": round(util[core], 2)},
                    "neuroncore_utilization",
                )
            if want_flops and core in flops:
                self.w.counter(pid, f"{prefix}flops", start[core], {"flops": flops[core]}, "flops")
                inst.flops_cores.add(core)
            names: tuple[str, ...] = ()
            if want_physical and core in physical:
                values: dict[str, float | None] = {n: round(v, 2) for n, v in sorted(physical[core].items())}
                self.w.counter(pid, f"{prefix}physical utilization", start[core], values, PHYSICAL)
                names = tuple(values)
            inst.core_tracks[core] = (pid, prefix, names)
        for core in [c for c in inst.core_tracks if c not in util]:  # no runtime on the core any more
            pid, prefix, names = inst.core_tracks.pop(core)
            zero_at = inst.last_time
            if want_util:
                self.w.counter(pid, f"{prefix}utilization", zero_at, {"percent": 0.0}, "neuroncore_utilization", True)
            if names:
                zeros: dict[str, float | None] = dict.fromkeys(names, 0.0)
                self.w.counter(pid, f"{prefix}physical utilization", zero_at, zeros, PHYSICAL, exact=True)
            if want_flops and core in inst.flops_cores:
                self.w.counter(pid, f"{prefix}flops", zero_at, {"flops": 0.0}, "flops", exact=True)
                inst.flops_cores.discard(core)

    def _memory_counters(self, inst: _Instance, snap: Snapshot, runtimes: list[Runtime]) -> None:
        if not self.sel.wants_type("device_memory"):
            return
        per_key: dict[int, dict[str, int]] = {}
        for rt in runtimes:
            for core, cats in (rt.memory or {}).items():
                if not self.sel.wants_core(core):
                    continue
                key = core if self.group_by == "neuroncore" else core // inst.cores_per_device
                acc = per_key.setdefault(key, dict.fromkeys(MEMORY_CATEGORIES, 0))
                for c in MEMORY_CATEGORIES:
                    acc[c] += cats[c]
        for key in sorted(per_key):
            if self.group_by == "neuroncore":
                pid, name = self._core_pid(inst, key), "memory"
            else:
                pid, prefix = self._device_place(inst, key)
                name = f"{prefix}memory"
            self.w.counter(pid, name, snap.time, dict(per_key[key]), "device_memory")
            inst.memory_tracks[key] = (pid, name, MEMORY_CATEGORIES)
        for gone in [k for k in inst.memory_tracks if k not in per_key]:
            pid, name, categories = inst.memory_tracks.pop(gone)
            self.w.counter(pid, name, inst.last_time, dict.fromkeys(categories, 0), "device_memory", exact=True)

    def _process_memory(self, inst: _Instance, snap: Snapshot, runtimes: list[Runtime]) -> None:
        """Process grouping: each runtime's device memory by category, per device, in its own process."""
        if not self.sel.wants_type("device_memory"):
            return
        for rt in runtimes:
            tracks = inst.runtimes[rt.key]
            per_dev: dict[int, dict[str, int]] = {}
            for core, cats in (rt.memory or {}).items():
                if not self.sel.wants_core(core):
                    continue
                acc = per_dev.setdefault(core // inst.cores_per_device, dict.fromkeys(MEMORY_CATEGORIES, 0))
                for c in MEMORY_CATEGORIES:
                    acc[c] += cats[c]
            pid = self._runtime_pid(inst, rt)
            for dev in sorted(per_dev):
                self._counter(tracks, pid, f"ND {dev} memory", snap.time, dict(per_dev[dev]), "device_memory")

    def _host_counters(self, inst: _Instance, snap: Snapshot) -> None:
        if snap.host_cpu and snap.host_cpu_period is not None and self.sel.wants_type("host_vcpu"):
            values: dict[str, float | None] = {k: round(v, 2) for k, v in snap.host_cpu.items() if k != "idle"}
            self.w.counter(self._main(inst), "host vCPU %", snap.time - snap.host_cpu_period, values, "host_vcpu")
        if snap.host_memory and self.sel.wants_type("host_memory"):
            m = snap.host_memory
            values = {
                "used": m.get("memory_used_bytes"),
                "total": m.get("memory_total_bytes"),
                "swap_used": m.get("swap_used_bytes"),
            }
            self.w.counter(self._main(inst), "host memory", snap.time, values, "host_memory")

    def _runtime_gone(self, inst: _Instance, tracks: _RuntimeTracks) -> None:
        for pid, name, keys, cat in sorted(tracks.counters):
            self.w.counter(pid, name, inst.last_time, dict.fromkeys(keys, 0), cat, exact=True)
        inst.lifetimes.append((tracks, inst.last_time))

    # -- the end --------------------------------------------------------------------------------------------

    def finish(self, problems: list[Problem], highlight: bool = False) -> None:
        """Write the slices: runtime lifetimes, error episodes, and with ``highlight`` every problem, marked."""
        for inst in self._instances.values():
            for tracks in inst.runtimes.values():
                inst.lifetimes.append((tracks, tracks.last_seen))
            inst.runtimes.clear()
        threads: dict[tuple[int, Hashable], _Thread] = {}
        if self.sel.wants_type("runtime"):
            self._lifetime_slices(threads)
        self._error_slices(problems, threads)
        for (pid, key), thread in threads.items():
            tid = self.w.thread(pid, key, thread.name, thread.order)
            for sl in sorted(thread.slices, key=lambda x: (x.start, -x.end)):
                self.w.complete(pid, tid, sl.name, sl.start, sl.end, sl.cat, sl.args, sl.cname)
        if highlight:
            self._highlight(problems)

    def _lifetime_slices(self, threads: dict[tuple[int, Hashable], _Thread]) -> None:
        for inst in self._instances.values():
            for tracks, end in inst.lifetimes:
                rt = tracks.runtime
                args: dict[str, Any] = {"pid": rt.pid, "tag": rt.tag, "cores": format_cores(rt.cores)}
                if rt.models is not None:
                    args["loaded_models"] = rt.models
                sl = _Slice(tracks.first_seen, end, rt.name, "runtime", args)
                for pid in self._runtime_pids(inst, rt, rt.cores):
                    thread = threads.setdefault((pid, ("runtime", rt.key)), _Thread(rt.name, rt.pid * 100))
                    thread.slices.append(sl)

    def _error_slices(self, problems: list[Problem], threads: dict[tuple[int, Hashable], _Thread]) -> None:
        runtimes = {
            (name, t.runtime.key): t.runtime for name, inst in self._instances.items() for t, _ in inst.lifetimes
        }
        for p in problems:
            inst = self._instances.get(p.instance)
            if inst is None or p.kind not in ERROR_TYPES:
                continue
            sl = _Slice(p.start, p.end, p.kind, p.kind, dict(p.details), ERROR_COLOR)
            if p.kind == ECC_UNCORRECTED:
                dev = p.device or 0
                pids = self._device_pids(inst, dev, p.cores)
                key: Hashable = ("ecc", dev)
                name, order = f"ND {dev} {p.kind}", 10_000_000 + dev
            else:
                rt = runtimes.get((p.instance, p.runtime)) if p.runtime is not None else None
                if rt is None:
                    continue
                pids = self._runtime_pids(inst, rt, p.cores)
                key = ("error", p.runtime, p.kind)
                name, order = f"{rt.name} {p.kind}", rt.pid * 100 + 1 + ERROR_TYPES.index(p.kind)
            for pid in pids:
                threads.setdefault((pid, key), _Thread(name, order)).slices.append(sl)

    def _device_pids(self, inst: _Instance, dev: int, cores: tuple[int, ...]) -> list[int]:
        """The trace processes a device's slices go to."""
        if self.group_by == "device":
            return [self._device_pid(inst, dev)]
        if self.group_by == "neuroncore":
            return [self._core_pid(inst, c) for c in cores if self.sel.wants_core(c)]
        return [self._main(inst)]

    def _highlight(self, problems: list[Problem]) -> None:
        """Each problem as a red slice on a "problem" thread of its instance, and a global marker at its start."""
        for p in problems:
            inst = self._instances.get(p.instance)
            if inst is None:
                continue
            pid = self._main(inst)
            key = ("problem", p.kind, p.subject, p.runtime)
            tid = self.w.thread(pid, key, f"problem: {p.kind} {p.subject}", -1000)
            args = dict(p.details)
            args["range"] = f"{clock(p.start, True)} - {clock(p.end, True)} UTC"
            self.w.complete(pid, tid, p.kind, p.start, p.end, "problem", args, PROBLEM_COLOR)
            self.w.instant(pid, tid, f"{p.kind} {p.subject}", p.start, "problem", {}, scope="g")

    def other_data(self) -> dict[str, Any]:
        return {
            "producer": "neuron-monitor-trace",
            "group_by": self.group_by,
            "instances": list(self._instances),
            "start": clock(self.first_time, True) + " UTC" if self.first_time is not None else "",
            "end": clock(self.last_time, True) + " UTC" if self.last_time is not None else "",
        }
