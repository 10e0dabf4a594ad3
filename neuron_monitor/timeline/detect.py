"""Snapshots -> ``Problem``s: the failures neuron-monitor-det reports and the trace marks.

Fed one ``Snapshot`` at a time (each instance's in time order), it keeps a little state per instance, runtime and
device, and returns every problem once the input ends:

- execution errors by type (numerical, hardware, timed_out, failed_to_queue, ...): an *episode* opens at the
  first fresh execution_stats period with a non-zero count, spans the following erroneous periods, and ends at
  the first clean period that ends more than ``merge_gap`` seconds after the last erroneous one;
- uncorrected ECC (memory or SRAM) per device, as episodes of fresh neuron_hw_counters periods;
- repairable uncorrected HBM ECC per device (growth of the count), as episodes of fresh neuron_device_telemetry
  periods, and a device the driver reports unhealthy, from the first report naming a component to the first
  healthy one (``components``: those seen, comma-separated);
- hang suspicion: a runtime with models loaded, that has worked before, whose NeuronCores all sit at zero
  utilization (and that completes no execution) for ``hang_periods`` fresh periods in a row;
- a runtime that vanishes: in one report of its instance and not in the next.

A problem's time range is [start of its first period, end of its last]; ``ongoing`` in its details says it was
still open when the recording ended (as a non-complete event in neuron-det hints at a hang).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from neuron_monitor.groups.neuron_device_telemetry import spec as T
from neuron_monitor.timeline.extract import ECC_UNCORRECTED, Runtime, Snapshot
from neuron_monitor.timeline.selection import HANG_SUSPECTED, RUNTIME_VANISHED, Selection, format_cores

DEFAULT_HANG_PERIODS = 12
DEFAULT_MERGE_GAP = 0.0


@dataclass
class Problem:
    kind: str
    instance: str
    subject: str  # "NC 3", "NC 0-3", "ND 2"
    start: float
    end: float
    details: dict[str, Any]
    cores: tuple[int, ...] = ()
    device: int | None = None
    runtime: tuple[int, str] | None = None  # (pid, tag)

    def line(self, with_date: bool = False, with_instance: bool = False) -> str:
        details = dict(self.details)
        if with_instance:
            details["instance_id"] = self.instance
        when = f"{clock(self.start, with_date)} - {clock(self.end, with_date)}"
        return f"{self.kind} {self.subject} @ {when}: {format_details(details)}"


_BARE = re.compile(r"[A-Za-z0-9_.:/+-]+")
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def format_details(details: dict[str, Any]) -> str:
    """``key=value`` pairs separated by spaces, like logfmt: numbers as they are, ``true``/``false``, strings bare
    when they are one word of safe characters and JSON-quoted otherwise (so every line splits back unambiguously)."""
    return " ".join(f"{k}={_value_text(v)}" for k, v in details.items())


def _value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    text = str(v)
    if _BARE.fullmatch(text) and text not in ("true", "false") and not _is_number(text):
        return text
    return json.dumps(text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_details(text: str) -> dict[str, Any]:
    """The inverse of `format_details` (for scripts reading neuron-monitor-det's lines)."""
    out: dict[str, Any] = {}
    for key, raw in _PAIR.findall(text):
        value: Any
        if raw.startswith('"'):
            value = json.loads(raw)
        elif raw in ("true", "false"):
            value = raw == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    value = raw
        out[key] = value
    return out


def clock(t: float, with_date: bool = False) -> str:
    """Epoch seconds -> UTC wall clock, ``12:00:01`` (``2025-01-02 12:00:01`` with the date)."""
    d = datetime.fromtimestamp(t, tz=timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S")


def runtime_subject(rt: Runtime) -> str:
    return f"NC {format_cores(rt.cores)}" if rt.cores else f"runtime {rt.name}"


@dataclass
class _Episode:
    problem: Problem
    periods: int = 1


@dataclass
class _RuntimeState:
    runtime: Runtime
    active_before: bool = False
    idle_periods: int = 0
    idle_start: float = 0.0
    hang: _Episode | None = None


@dataclass
class _InstanceState:
    runtimes: dict[tuple[int, str], _RuntimeState] = field(default_factory=dict)
    last_time: float = 0.0


class Detector:
    def __init__(
        self,
        selection: Selection | None = None,
        hang_periods: int = DEFAULT_HANG_PERIODS,
        merge_gap: float = DEFAULT_MERGE_GAP,
    ) -> None:
        if hang_periods < 1:
            raise ValueError("hang periods must be 1 or more")
        self.selection = selection or Selection()
        self.hang_periods = hang_periods
        self.merge_gap = merge_gap
        self.problems: list[Problem] = []
        self._open: dict[tuple[Any, ...], _Episode] = {}  # (instance, kind, subject key) -> open episode
        self._instances: dict[str, _InstanceState] = {}

    @property
    def instances(self) -> list[str]:
        """The instances seen so far."""
        return list(self._instances)

    # -- episodes of per-period counts ------------------------------------------------------------------------

    def _count(self, key: tuple[Any, ...], count: int, t: float, period: float, make: Any) -> None:
        """One fresh period ending at ``t`` with ``count`` occurrences for ``key``."""
        ep = self._open.get(key)
        if count > 0:
            if ep is None:
                problem: Problem = make(t - period, t)
                problem.details["count"] = count
                problem.details["periods"] = 1
                self._open[key] = _Episode(problem)
            else:
                ep.problem.end = t
                ep.problem.details["count"] += count
                ep.periods += 1
                ep.problem.details["periods"] = ep.periods
        elif ep is not None and t - ep.problem.end > self.merge_gap:
            self._close(key)

    def _close(self, key: tuple[Any, ...], ongoing: bool = False) -> None:
        ep = self._open.pop(key)
        if ongoing:
            ep.problem.details["ongoing"] = True
        self.problems.append(ep.problem)

    def _close_runtime(self, instance: str, rkey: tuple[int, str]) -> None:
        for key in [k for k in self._open if k[0] == instance and k[2] == rkey]:
            self._close(key)

    # -- feeding ------------------------------------------------------------------------------------------

    def feed(self, snap: Snapshot) -> None:
        sel = self.selection
        if not sel.wants_instance(snap.instance):
            return
        inst = self._instances.setdefault(snap.instance, _InstanceState())
        present: set[tuple[int, str]] = set()
        for rt in snap.runtimes:
            if not sel.wants_any_core(rt.cores):
                continue
            present.add(rt.key)
            state = inst.runtimes.get(rt.key)
            if state is None:
                state = inst.runtimes[rt.key] = _RuntimeState(rt)
            state.runtime = rt
            self._runtime_errors(snap, rt)
            self._hang(snap, state)
        for rkey in [k for k in inst.runtimes if k not in present]:
            gone = inst.runtimes.pop(rkey)
            self._vanished(snap, inst, gone)
        if snap.ecc is not None and snap.ecc_period is not None:
            self._ecc(snap)
        if snap.tracks:
            self._device_telemetry(snap)
        inst.last_time = snap.time

    def _runtime_errors(self, snap: Snapshot, rt: Runtime) -> None:
        ex = rt.execution
        if ex is None:
            return
        # every type seen open for this runtime must see this period too, even at zero
        kinds = set(ex.errors) | {k[1] for k in self._open if k[0] == snap.instance and k[2] == rt.key}
        for kind in kinds:
            if not self.selection.wants_type(kind):
                continue

            def make(start: float, end: float, kind: str = kind) -> Problem:
                return Problem(
                    kind=kind,
                    instance=snap.instance,
                    subject=runtime_subject(rt),
                    start=start,
                    end=end,
                    details={"runtime_tag": rt.tag, "pid": rt.pid},
                    cores=rt.cores,
                    runtime=rt.key,
                )

            self._count((snap.instance, kind, rt.key), ex.errors.get(kind, 0), snap.time, ex.period, make)

    def _ecc(self, snap: Snapshot) -> None:
        if not self.selection.wants_type(ECC_UNCORRECTED) or snap.ecc is None:
            return
        per = snap.cores_per_device
        period = snap.ecc_period or 0.0
        for dev, counts in snap.ecc.items():
            if not self.selection.wants_any_core(range(dev * per, (dev + 1) * per)):
                continue
            total = counts["mem"] + counts["sram"]
            key = (snap.instance, ECC_UNCORRECTED, ("device", dev))
            ep = self._open.get(key)
            if ep is not None and total:
                ep.problem.details["mem_ecc_uncorrected"] += counts["mem"]
                ep.problem.details["sram_ecc_uncorrected"] += counts["sram"]

            def make(start: float, end: float, dev: int = dev, counts: dict[str, int] = counts) -> Problem:
                return Problem(
                    kind=ECC_UNCORRECTED,
                    instance=snap.instance,
                    subject=f"ND {dev}",
                    start=start,
                    end=end,
                    details={"mem_ecc_uncorrected": counts["mem"], "sram_ecc_uncorrected": counts["sram"]},
                    cores=tuple(range(dev * per, (dev + 1) * per)),
                    device=dev,
                )

            self._count(key, total, snap.time, period, make)

    def _device_telemetry(self, snap: Snapshot) -> None:
        """Repairable ECC growth and unhealthy components, from the neuron_device_telemetry group's tracks."""
        per = snap.cores_per_device
        sel = self.selection
        last = self._instances[snap.instance].last_time
        for _, (track, key, values) in snap.tracks:
            if (track is not T.TRACK_HEALTH and track is not T.TRACK_REPAIRABLE) or not key or not key[0].isdigit():
                continue
            dev = int(key[0])
            if not sel.wants_any_core(range(dev * per, (dev + 1) * per)):
                continue
            kind = T.DEVICE_UNHEALTHY if track is T.TRACK_HEALTH else T.ECC_REPAIRABLE
            if not sel.wants_type(kind):
                continue
            pkey = (snap.instance, kind, ("device", dev))
            if kind == T.ECC_REPAIRABLE:
                count = int(values.get(T.REPAIRABLE_ECC, 0.0))

                def make(start: float, end: float, dev: int = dev, kind: str = kind) -> Problem:
                    cores = tuple(range(dev * per, (dev + 1) * per))
                    return Problem(kind, snap.instance, f"ND {dev}", start, end, {}, cores, dev)

                self._count(pkey, count, snap.time, snap.time - last if last else 0.0, make)
                continue
            components = sorted(c for c, v in values.items() if v > 0)
            ep = self._open.get(pkey)
            if components and ep is None:
                cores = tuple(range(dev * per, (dev + 1) * per))
                problem = Problem(
                    kind, snap.instance, f"ND {dev}", snap.time, snap.time, {"components": ""}, cores, dev
                )
                ep = self._open[pkey] = _Episode(problem)
            if components and ep is not None:
                ep.problem.end = snap.time
                seen = [c for c in ep.problem.details["components"].split(",") if c]
                ep.problem.details["components"] = ",".join([*seen, *(c for c in components if c not in seen)])
            elif ep is not None:
                self._close(pkey)

    def _hang(self, snap: Snapshot, state: _RuntimeState) -> None:
        rt = state.runtime
        if rt.core_period is None or not rt.utilization:
            return
        utils = [rt.utilization[c] for c in rt.cores if c in rt.utilization] or list(rt.utilization.values())
        executed = rt.execution is not None and rt.execution.executions > 0
        idle = all(u <= 0.0 for u in utils) and not executed
        loaded = rt.models is None or rt.models > 0
        start = snap.time - rt.core_period
        if not idle or not loaded:
            if not idle:
                state.active_before = True
            if state.hang is not None:
                self.problems.append(state.hang.problem)
                state.hang = None
            state.idle_periods = 0
            return
        if not state.active_before:
            return
        if state.idle_periods == 0:
            state.idle_start = start
        state.idle_periods += 1
        if state.hang is not None:
            state.hang.problem.end = snap.time
            state.hang.problem.details["periods"] = state.idle_periods
        elif state.idle_periods >= self.hang_periods and self.selection.wants_type(HANG_SUSPECTED):
            details: dict[str, Any] = {"runtime_tag": rt.tag, "pid": rt.pid, "periods": state.idle_periods}
            if rt.models is not None:
                details["loaded_models"] = rt.models
            problem = Problem(
                kind=HANG_SUSPECTED,
                instance=snap.instance,
                subject=runtime_subject(rt),
                start=state.idle_start,
                end=snap.time,
                details=details,
                cores=rt.cores,
                runtime=rt.key,
            )
            state.hang = _Episode(problem)

    def _vanished(self, snap: Snapshot, inst: _InstanceState, gone: _RuntimeState) -> None:
        rt = gone.runtime
        self._close_runtime(snap.instance, rt.key)
        if gone.hang is not None:
            self.problems.append(gone.hang.problem)
        if not self.selection.wants_type(RUNTIME_VANISHED):
            return
        details: dict[str, Any] = {"runtime_tag": rt.tag, "pid": rt.pid}
        if rt.models is not None:
            details["loaded_models"] = rt.models
        self.problems.append(
            Problem(
                kind=RUNTIME_VANISHED,
                instance=snap.instance,
                subject=runtime_subject(rt),
                start=inst.last_time,
                end=snap.time,
                details=details,
                cores=rt.cores,
                runtime=rt.key,
            )
        )

    def finish(self) -> list[Problem]:
        """Close what is still open (marked ``ongoing``) and return every problem, in time order."""
        for key in list(self._open):
            self._close(key, ongoing=True)
        for inst in self._instances.values():
            for state in inst.runtimes.values():
                if state.hang is not None:
                    state.hang.problem.details["ongoing"] = True
                    self.problems.append(state.hang.problem)
                    state.hang = None
        self.problems.sort(key=lambda p: (p.start, p.end, p.instance, p.kind, p.subject))
        return self.problems
