"""Snapshots (+ detected problems) -> Trace Event Format events: the tracks of the timeline and where they go.

Tracks come from the group specs (``GroupSpec.tracks`` and ``timeline``, see ``neuron_monitor.schema.spec.Track``),
per instance:

- host tracks (vCPU %, memory) in the instance's process;
- per runtime, its runtime tracks (executions/s, latency, vCPU %, host memory), prefixed with its name; a slice
  for its lifetime; one slice per error episode (from ``detect``), on one thread per error type;
- per NeuronCore and per device: a runtime group's core and device tracks summed over the runtimes (utilization,
  flops, physical utilization; device memory by category, one counter with a value per category: stacked in
  chrome://tracing, one track per category in Perfetto); a system group's core and device tracks as they are
  (power, busy ratio, health); device slices for device problems (uncorrected ECC).

A period rate (``PERIOD``) is placed at the start of the period it describes and written only when its group is
fresh; a level (``ALWAYS``, memory) is written whenever it changes. When a runtime vanishes its counters drop to 0
at the last report it was in; a summed track's place drops to 0 when no runtime reports it any more.

Grouping (``--group-by``, as the Neuron Explorer system trace viewer) decides which trace process a track is in:
``instance`` (default): one process per instance holding everything; ``device``: one process per device (its
cores, memory, ECC, and the runtimes working on it) plus one per instance for the host and runtime counters;
``neuroncore``: one process per NeuronCore (utilization, flops, its memory by category, the runtimes on it) plus
one per instance; ``process``: one process per runtime (its counters, its own cores and memory) plus one per
instance for the host, device totals and ECC.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.schema.spec import (
    ALWAYS,
    CORE_TRACK,
    COUNTER_TRACK,
    DEVICE_TRACK,
    HOST_TRACK,
    PERIOD,
    RUNTIME_TRACK,
    Track,
    registry,
    sum_over_runtimes,
)
from neuron_monitor.timeline.detect import Problem, clock
from neuron_monitor.timeline.extract import GroupPart, Runtime, Snapshot
from neuron_monitor.timeline.selection import Selection, det_rules, format_cores
from neuron_monitor.timeline.trace_writer import TraceWriter

GROUP_BY: tuple[str, ...] = ("instance", "device", "neuroncore", "process")
ERROR_COLOR = "terrible"  # chrome://tracing reserved colour name (red)
PROBLEM_COLOR = "terrible"
GAP_COLOR = "grey"  # a stretch in which a runtime's group could not be read (its tracks have no sample there)


@dataclass
class _RuntimeTracks:
    runtime: Runtime
    first_seen: float
    last_seen: float
    counters: set[tuple[int, str, tuple[str, ...], str]] = field(default_factory=set)  # (pid, name, keys, cat)
    groups: set[str] = field(default_factory=set)  # the groups it has reported
    unreadable: dict[str, float] = field(default_factory=dict)  # group -> since when it is left out (its error)
    gaps: list[tuple[str, float, float]] = field(default_factory=list)  # (group, start, end): periods not read

    def groups_seen(self, rt: Runtime, before: float, now: float) -> None:
        """Note which of the groups it reported before are left out of this report (their error) and which
        are back: each stretch a group was not read becomes a gap, from the last report that had it."""
        present = {part.spec.name for part in rt.groups}
        for group in self.groups - present:
            self.unreadable.setdefault(group, before)
        for group in [g for g in self.unreadable if g in present]:
            self.gaps.append((group, self.unreadable.pop(group), before))
        self.groups |= present

    def close_gaps(self) -> None:
        for group, start in self.unreadable.items():
            self.gaps.append((group, start, self.last_seen))
        self.unreadable.clear()


@dataclass
class _Instance:
    ordinal: int
    name: str
    instance_type: str
    last_time: float = 0.0
    cores_per_device: int = 1
    runtimes: dict[tuple[int, str], _RuntimeTracks] = field(default_factory=dict)
    lifetimes: list[tuple[_RuntimeTracks, float]] = field(default_factory=list)  # (tracks, end) of finished ones
    # the places of summed tracks written (scope -> place -> track -> (pid, name, series)), to drop to 0 when gone
    summed: dict[str, dict[int, dict[Track, tuple[int, str, tuple[str, ...]]]]] = field(default_factory=dict)
    # who filled each summed place last: (scope, place) -> {(runtime key, group name)}, to tell a place whose runtime
    # left (drops to 0) from one whose runtime is there but its group could not be read (no sample: unknown, not 0)
    owners: dict[tuple[str, int], set[tuple[tuple[int, str], str]]] = field(default_factory=dict)


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


def _track_order() -> dict[Track, int]:
    """The tracks in declaration order (a gone place drops its tracks to 0 in this order)."""
    return {t: i for i, t in enumerate(t for spec in registry().all() for t in spec.tracks)}


def _at(part: GroupPart, track: Track, t: float) -> float | None:
    """When a sample of ``track`` from ``part`` (a report at ``t``) is placed; None: not written for this report."""
    if track.when == ALWAYS:
        return t
    if not part.fresh:
        return None
    if track.when == PERIOD:
        return t - part.period if part.period > 0 else None
    return t


def _rate(track: Track, values: Mapping[str, float], period: float) -> Mapping[str, float]:
    """Counts over the period -> per second, for ``per_second`` tracks."""
    return {k: v / period for k, v in values.items()} if track.per_second and period > 0 else values


def _rounded(track: Track, values: Mapping[str, float]) -> dict[str, float | None]:
    digits = track.digits
    return dict(values) if digits is None else {k: round(v, digits) for k, v in values.items()}


def _core_key(key: tuple[str, ...]) -> int | None:
    return int(key[0]) if key and key[0].isdigit() else None


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
                periods = [p.period for p in rt.groups if p.fresh and any(t.when == PERIOD for t in p.spec.tracks)]
                start = snap.time - max([p for p in periods if p] or [0.0])
                first = max(start, inst.last_time)
                tracks = inst.runtimes[rt.key] = _RuntimeTracks(rt, first_seen=first, last_seen=snap.time)
            tracks.groups_seen(rt, tracks.last_seen, snap.time)
            tracks.runtime = rt
            tracks.last_seen = snap.time
            self._runtime_counters(inst, snap, tracks)
        if self.group_by != "process":
            self._summed(inst, snap, runtimes, CORE_TRACK)
            self._summed(inst, snap, runtimes, DEVICE_TRACK)
        else:
            for rt in runtimes:
                self._runtime_devices(inst, snap, inst.runtimes[rt.key])
        self._system_counters(inst, snap)
        inst.last_time = snap.time

    def _wants(self, track: Track) -> bool:
        return track.kind == COUNTER_TRACK and self.sel.wants_type(track.category)

    def _runtime_counters(self, inst: _Instance, snap: Snapshot, tracks: _RuntimeTracks) -> None:
        """A runtime's own tracks: its runtime tracks, and with --group-by process its NeuronCores' tracks."""
        rt = tracks.runtime
        per_process = self.group_by == "process"
        pid = self._runtime_pid(inst, rt) if per_process else self._main(inst)
        prefix = "" if per_process else f"{rt.name} "
        cores: list[tuple[int, GroupPart, Track, Mapping[str, float]]] = []
        for part in rt.groups:
            for track, key, values in part.samples:
                if not self._wants(track):
                    continue
                if track.scope not in (CORE_TRACK, DEVICE_TRACK):
                    at = _at(part, track, snap.time)
                    if at is not None:
                        written = _rounded(track, _rate(track, values, part.period))
                        self._counter(tracks, pid, f"{prefix}{track.name}", at, written, track.category)
                elif per_process and track.scope == CORE_TRACK and track.per_runtime:
                    core = _core_key(key)
                    if core is not None and self.sel.wants_core(core):
                        cores.append((core, part, track, values))
        for core, part, track, values in sorted(cores, key=lambda c: c[0]):
            at = _at(part, track, snap.time)
            if at is not None:
                written = _rounded(track, _rate(track, values, part.period))
                self._counter(tracks, pid, f"NC {core} {track.name}", at, written, track.category)

    def _runtime_devices(self, inst: _Instance, snap: Snapshot, tracks: _RuntimeTracks) -> None:
        """--group-by process: a runtime's device tracks (summed over its cores), per device, in its process."""
        rt = tracks.runtime
        per_track: dict[Track, list[dict[str, Mapping[str, float]]]] = {}
        times: dict[Track, float] = {}
        for part in rt.groups:
            for track, key, values in part.samples:
                core = _core_key(key)
                if track.scope != DEVICE_TRACK or not track.per_runtime or core is None or not self._wants(track):
                    continue
                at = _at(part, track, snap.time)
                if at is None or (track.from_cores and not self.sel.wants_core(core)):
                    continue
                dev = core // inst.cores_per_device if track.from_cores else core
                per_track.setdefault(track, []).append({str(dev): _rate(track, values, part.period)})
                times[track] = at
        if not per_track:
            return
        pid = self._runtime_pid(inst, rt)
        for track, maps in per_track.items():
            sums = sum_over_runtimes(maps, track.integer)
            for device in sorted(sums, key=int):
                written = _rounded(track, sums[device])
                self._counter(tracks, pid, f"ND {device} {track.name}", times[track], written, track.category)

    def _place(self, inst: _Instance, scope: str, track: Track, place: int) -> tuple[int, str]:
        """(pid, track name) of a summed track at a NeuronCore or device."""
        if scope == CORE_TRACK:
            pid, prefix = self._core_place(inst, place)
        elif track.from_cores and self.group_by == "neuroncore":
            pid, prefix = self._core_pid(inst, place), ""
        else:
            pid, prefix = self._device_place(inst, place)
        return pid, f"{prefix}{track.name}"

    def _summed(self, inst: _Instance, snap: Snapshot, runtimes: list[Runtime], scope: str) -> None:
        """The runtime groups' core (or device) tracks, summed over the runtimes per place; a place no runtime
        reports any more drops to 0, unless a runtime that filled it is still there with that group unreadable
        (left out of the snapshot for its error): then it gets no sample, since 0 would claim an idle core."""
        per_track: dict[Track, list[dict[str, Mapping[str, float]]]] = {}
        starts: dict[Track, dict[int, float]] = {}
        owners: dict[int, set[tuple[tuple[int, str], str]]] = {}
        for rt in runtimes:
            for part in rt.groups:
                for track, key, values in part.samples:
                    core = _core_key(key)
                    if track.scope != scope or core is None or not self._wants(track):
                        continue
                    if (scope == CORE_TRACK or track.from_cores) and not self.sel.wants_core(core):
                        continue
                    place = core
                    if scope == DEVICE_TRACK and track.from_cores and self.group_by != "neuroncore":
                        place = core // inst.cores_per_device
                    per_track.setdefault(track, []).append({str(place): _rate(track, values, part.period)})
                    owners.setdefault(place, set()).add((rt.key, part.spec.name))
                    at = _at(part, track, snap.time)
                    if at is not None:
                        due = starts.setdefault(track, {})
                        due[place] = min(due.get(place, at), at)
        placed = inst.summed.setdefault(scope, {})
        sums = {track: sum_over_runtimes(maps, track.integer) for track, maps in per_track.items()}
        for place in sorted({p for due in starts.values() for p in due}):
            for track, due in starts.items():
                if place in due:
                    pid, name = self._place(inst, scope, track, place)
                    written = _rounded(track, sums[track][str(place)])
                    self.w.counter(pid, name, due[place], written, track.category)
                    placed.setdefault(place, {})[track] = (pid, name, tuple(written))
        present = {int(p) for totals in sums.values() for p in totals}
        readable = {rt.key: {part.spec.name for part in rt.groups} for rt in runtimes}
        for place, filled_by in owners.items():
            inst.owners[(scope, place)] = filled_by
        for place in [p for p in placed if p not in present]:
            before = inst.owners.get((scope, place), set())
            if any(key in readable and group not in readable[key] for key, group in before):
                continue  # its runtime is there, its group unreadable: unknown, no sample
            inst.owners.pop((scope, place), None)
            order = _track_order()
            for track, (pid, name, series) in sorted(placed.pop(place).items(), key=lambda t: order[t[0]]):
                zeros: dict[str, float | None] = dict.fromkeys(series, 0 if track.integer else 0.0)
                self.w.counter(pid, name, inst.last_time, zeros, track.category, exact=True)

    def _system_counters(self, inst: _Instance, snap: Snapshot) -> None:
        """The system groups' tracks: host ones in the instance's process, core and device ones at their place."""
        for part in snap.system:
            for track, key, values in part.samples:
                at = _at(part, track, snap.time)
                if at is None or not self._wants(track):
                    continue
                index = _core_key(key)
                if track.scope == CORE_TRACK and index is not None:
                    if not self.sel.wants_core(index):
                        continue
                    pid, prefix = self._core_place(inst, index)
                elif track.scope == DEVICE_TRACK and index is not None:
                    pid, prefix = self._device_place(inst, index)
                else:
                    pid, prefix = self._main(inst), ""
                written = _rounded(track, _rate(track, values, part.period))
                self.w.counter(pid, f"{prefix}{track.name}", at, written, track.category)

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
            for tracks, _ in inst.lifetimes:
                tracks.close_gaps()
        threads: dict[tuple[int, Hashable], _Thread] = {}
        if self.sel.wants_type("runtime"):
            self._lifetime_slices(threads)
        self._error_slices(problems, threads)
        self._write_threads(threads)
        if highlight:
            self._highlight(problems)
        if self.sel.wants_type("runtime"):
            gaps: dict[tuple[int, Hashable], _Thread] = {}
            self._gap_slices(gaps)
            self._write_threads(gaps)  # last: every other thread keeps the id it had before gaps were drawn

    def _write_threads(self, threads: dict[tuple[int, Hashable], _Thread]) -> None:
        for (pid, key), thread in threads.items():
            tid = self.w.thread(pid, key, thread.name, thread.order)
            for sl in sorted(thread.slices, key=lambda x: (x.start, -x.end)):
                self.w.complete(pid, tid, sl.name, sl.start, sl.end, sl.cat, sl.args, sl.cname)

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

    def _gap_slices(self, threads: dict[tuple[int, Hashable], _Thread]) -> None:
        """Each runtime's stretches in which one of its groups could not be read, grey, on its own thread."""
        for inst in self._instances.values():
            for tracks, _ in inst.lifetimes:
                rt = tracks.runtime
                args: dict[str, Any] = {"pid": rt.pid, "tag": rt.tag, "cores": format_cores(rt.cores)}
                gaps = [
                    _Slice(start, stop, f"{group} unreadable", "unreadable", {**args, "group": group}, GAP_COLOR)
                    for group, start, stop in tracks.gaps
                ]
                if not gaps:
                    continue
                for pid in self._runtime_pids(inst, rt, rt.cores):
                    name = f"{rt.name} unreadable"
                    thread = threads.setdefault((pid, ("unreadable", rt.key)), _Thread(name, rt.pid * 100 + 99))
                    thread.slices += gaps

    def _error_slices(self, problems: list[Problem], threads: dict[tuple[int, Hashable], _Thread]) -> None:
        runtimes = {
            (name, t.runtime.key): t.runtime for name, inst in self._instances.items() for t, _ in inst.lifetimes
        }
        rules = det_rules()
        # a runtime's error threads are ordered by the position of the error type among the runtime rules
        runtime_kinds = [kind for kind, rule in rules.items() if rule.scope == RUNTIME_TRACK]
        key: Hashable
        for p in problems:
            inst = self._instances.get(p.instance)
            rule = rules.get(p.kind)
            if inst is None or rule is None or not rule.trace_slices:
                continue
            sl = _Slice(p.start, p.end, p.kind, p.kind, dict(p.details), ERROR_COLOR)
            if rule.scope == HOST_TRACK:
                pids = [self._main(inst)]
                key = ("host", p.kind, p.subject)
                name, order = f"{p.subject} {p.kind}", 20_000_000
            elif rule.scope == DEVICE_TRACK:
                dev = p.device or 0
                pids = self._device_pids(inst, dev, p.cores)
                key = ("device", p.kind, dev)
                name, order = f"ND {dev} {p.kind}", 10_000_000 + dev
            else:
                rt = runtimes.get((p.instance, p.runtime)) if p.runtime is not None else None
                if rt is None:
                    continue
                pids = self._runtime_pids(inst, rt, p.cores)
                key = ("error", p.runtime, p.kind)
                name, order = f"{rt.name} {p.kind}", rt.pid * 100 + 1 + runtime_kinds.index(p.kind)
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
