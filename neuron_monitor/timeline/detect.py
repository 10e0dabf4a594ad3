"""Snapshots -> ``Problem``s: the failures neuron-monitor-det reports and the trace marks.

Fed one ``Snapshot`` at a time (each instance's in time order), it keeps a little state per instance, runtime and
device, and returns every problem once the input ends:

- the problems the group specs declare (``DetRule``s: execution errors by type, uncorrected ECC per device,
  repairable ECC, unhealthy devices, ...), from the findings of each fresh group object. A *count* rule's episode
  opens at the first fresh period with a non-zero count, spans the following ones, and ends at the first clean
  period that ends more than ``merge_gap`` seconds after the last erroneous one; a *state* rule's episode lasts
  from the first report where its condition holds to the first where it does not;
- hang suspicion: a runtime with models loaded, that has worked before, whose NeuronCores all sit at zero
  utilization (and that completes no execution) for ``hang_periods`` fresh periods in a row;
- a runtime that vanishes: in one report of its instance and not in the next.

A problem's time range is [start of its first period, end of its last]; ``ongoing`` in its details says it was
still open when the recording ended (as a non-complete event in neuron-det hints at a hang).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from neuron_monitor.schema.spec import (
    DEVICE_TRACK,
    HOST_TRACK,
    RUNTIME_TRACK,
    SINCE_LAST_REPORT,
    STATE_EPISODES,
    WARNING,
    DetFinding,
    DetRule,
)
from neuron_monitor.timeline.extract import GroupPart, Runtime, Snapshot
from neuron_monitor.timeline.selection import HANG_SUSPECTED, RUNTIME_VANISHED, Selection, format_cores

DEFAULT_HANG_PERIODS = 12
DEFAULT_MERGE_GAP = 0.0
# the problems det infers itself, across reports and groups (no single group object shows them)
INFERRED_RULES: tuple[DetRule, ...] = (
    DetRule(
        HANG_SUSPECTED,
        RUNTIME_TRACK,
        WARNING,
        "a runtime with models loaded that worked before sits at 0 % on all its NeuronCores (--hang-periods)",
    ),
    DetRule(
        RUNTIME_VANISHED, RUNTIME_TRACK, WARNING, "a runtime was in one report and not in the next (exit or crash)"
    ),
)


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


def _runtime_problem(kind: str, instance: str, rt: Runtime, start: float, end: float, **extra: Any) -> Problem:
    """A problem of a runtime (a suspected hang, a runtime gone): its tag, pid, ``extra`` and loaded models."""
    details: dict[str, Any] = {"runtime_tag": rt.tag, "pid": rt.pid, **extra}
    if rt.models is not None:
        details["loaded_models"] = rt.models
    return Problem(kind, instance, runtime_subject(rt), start, end, details, rt.cores, runtime=rt.key)


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

    def _count(
        self, key: tuple[Any, ...], count: int, t: float, period: float, make: Callable[[float, float], Problem] | None
    ) -> None:
        """One fresh period ending at ``t`` with ``count`` occurrences for ``key`` (``make``: its new problem)."""
        ep = self._open.get(key)
        if count > 0:
            if ep is None:
                assert make is not None
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
            for part in rt.groups:
                self._findings(snap, inst, part, rt)
            self._hang(snap, state)
        for rkey in [k for k in inst.runtimes if k not in present]:
            gone = inst.runtimes.pop(rkey)
            self._vanished(snap, inst, gone)
        for part in snap.system:
            self._findings(snap, inst, part, None)
        inst.last_time = snap.time

    # -- the spec's rules -------------------------------------------------------------------------------------

    def _findings(self, snap: Snapshot, inst: _InstanceState, part: GroupPart, rt: Runtime | None) -> None:
        """One fresh group object's findings for its spec's rules; an open count episode of the group and a
        subject it judged that gets no finding sees a count of 0."""
        if not part.fresh or not part.spec.det_rules:
            return
        judged: set[tuple[str, tuple[Any, ...]]] = set()
        for finding in part.findings():
            rule, key = finding[0], finding[1]
            subject = self._subject(snap, rule, key, rt)
            if subject is None or not self.selection.wants_type(rule.kind):
                continue
            judged.add((rule.kind, subject[0]))
            self._finding(snap, inst, part, finding, subject)
        kinds = {rule.kind for rule in part.spec.det_rules if rule.episode != STATE_EPISODES}
        for okey in [k for k in self._open if k[0] == snap.instance and k[1] in kinds]:
            if (okey[1], okey[2]) in judged or not self._judges(snap, okey[2], rt):
                continue
            rule = next(r for r in part.spec.det_rules if r.kind == okey[1])
            self._count(okey, 0, snap.time, self._period(snap, inst, part, rule), None)

    def _judges(self, snap: Snapshot, subject: tuple[Any, ...], rt: Runtime | None) -> bool:
        """Whether a group object (of runtime ``rt``, or a system group) speaks for an episode's subject."""
        if rt is not None:
            return subject == rt.key
        if subject[0] == "host":
            return True
        if subject[0] != "device":
            return False
        per = snap.cores_per_device
        return self.selection.wants_any_core(range(subject[1] * per, (subject[1] + 1) * per))

    def _subject(
        self, snap: Snapshot, rule: DetRule, key: tuple[str, ...], rt: Runtime | None
    ) -> tuple[tuple[Any, ...], str, tuple[int, ...], dict[str, Any]] | None:
        """(episode key, subject text, cores, the problem's first details) of a finding; None when not selected."""
        if rule.scope == HOST_TRACK:
            name = key[0] if key else "host"
            return ("host", name), name, (), {}
        if rule.scope == DEVICE_TRACK:
            if not key or not key[0].isdigit():
                return None
            dev = int(key[0])
            per = snap.cores_per_device
            cores = tuple(range(dev * per, (dev + 1) * per))
            if not self.selection.wants_any_core(cores):
                return None
            return ("device", dev), f"ND {dev}", cores, {}
        if rt is None:
            return None
        return rt.key, runtime_subject(rt), rt.cores, {"runtime_tag": rt.tag, "pid": rt.pid}

    @staticmethod
    def _period(snap: Snapshot, inst: _InstanceState, part: GroupPart, rule: DetRule) -> float:
        if rule.span == SINCE_LAST_REPORT:
            return snap.time - inst.last_time if inst.last_time else 0.0
        return part.period

    def _finding(
        self,
        snap: Snapshot,
        inst: _InstanceState,
        part: GroupPart,
        finding: DetFinding,
        subject: tuple[tuple[Any, ...], str, tuple[int, ...], dict[str, Any]],
    ) -> None:
        rule, _, amount, details = finding
        skey, text, cores, first = subject
        okey = (snap.instance, rule.kind, skey)
        device = skey[1] if skey[0] == "device" else None
        runtime = skey if device is None else None

        if rule.episode == STATE_EPISODES:

            def make_state(start: float, end: float) -> Problem:
                listed = {**first, **dict.fromkeys(details, "")}
                return Problem(rule.kind, snap.instance, text, start, end, listed, cores, device, runtime)

            self._state(okey, amount, snap.time, details, make_state)
            return

        def make(start: float, end: float) -> Problem:
            return Problem(rule.kind, snap.instance, text, start, end, {**first, **details}, cores, device, runtime)

        ep = self._open.get(okey)
        if ep is not None and amount:
            for name, v in details.items():
                ep.problem.details[name] += v
        self._count(okey, int(amount), snap.time, self._period(snap, inst, part, rule), make)

    def _state(
        self,
        okey: tuple[Any, ...],
        amount: float,
        t: float,
        details: Mapping[str, Any],
        make: Callable[[float, float], Problem],
    ) -> None:
        """A state rule: the episode is open while the condition holds; names in the details listed as seen."""
        ep = self._open.get(okey)
        if amount > 0:
            if ep is None:
                ep = self._open[okey] = _Episode(make(t, t))
            ep.problem.end = t
            for name, names in details.items():
                seen = [c for c in ep.problem.details[name].split(",") if c]
                ep.problem.details[name] = ",".join([*seen, *(c for c in names if c not in seen)])
        elif ep is not None:
            self._close(okey)

    def _hang(self, snap: Snapshot, state: _RuntimeState) -> None:
        rt = state.runtime
        facts = rt.facts
        utilization, period = facts.utilization, facts.utilization_period
        if period is None or not utilization:
            return
        utils = [utilization[c] for c in rt.cores if c in utilization] or list(utilization.values())
        executed = facts.executions is not None and facts.executions > 0
        idle = all(u <= 0.0 for u in utils) and not executed
        loaded = rt.models is None or rt.models > 0
        start = snap.time - period
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
            problem = _runtime_problem(
                HANG_SUSPECTED, snap.instance, rt, state.idle_start, snap.time, periods=state.idle_periods
            )
            state.hang = _Episode(problem)

    def _vanished(self, snap: Snapshot, inst: _InstanceState, gone: _RuntimeState) -> None:
        rt = gone.runtime
        self._close_runtime(snap.instance, rt.key)
        if gone.hang is not None:
            self.problems.append(gone.hang.problem)
        if not self.selection.wants_type(RUNTIME_VANISHED):
            return
        self.problems.append(_runtime_problem(RUNTIME_VANISHED, snap.instance, rt, inst.last_time, snap.time))

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
