"""Processing-time filters, as Neuron Explorer's: NeuronCores, event types, instances, host data.

Parses the option strings (``"0,2-5"``; ``"errors,^transient_error"``; ``"i-abc,i-def"``; a time range) into a
``Selection``
the converter and the detector ask. Bad strings raise ``ValueError`` with a one-line message.

Event types: every counter track and every error event has a type. ``counters`` and ``errors`` name the two
groups (as ``hardware``/``software`` do in NEURON_RT_INSPECT_EVENT_FILTER_TYPE); ``^type`` removes a type; a list
of removals only starts from every type. ``problems`` is ``errors`` plus what only neuron-monitor-det infers
(``hang_suspected``, ``runtime_vanished``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from neuron_monitor.schema.spec import COUNTER_TRACK, RUNTIME_TRACK, DetRule, registry

# the counter tracks' categories, as the group specs declare them (neuron_monitor/groups/<name>/spec.py)
COUNTER_TYPES: tuple[str, ...] = tuple(
    dict.fromkeys(t.category for spec in registry().all() for t in spec.tracks if t.kind == COUNTER_TRACK)
)
# slices that are neither counters nor errors: a runtime's lifetime; problems found by neuron-monitor-det
SLICE_TYPES: tuple[str, ...] = ("runtime",)


def det_rules() -> dict[str, DetRule]:
    """The problems the group specs declare (their det rules), by type: a runtime's first, then a device's."""
    rules = sorted(
        (rule for spec in registry().all() for rule in spec.det_rules), key=lambda r: r.scope != RUNTIME_TRACK
    )
    return {rule.kind: rule for rule in rules}


ERROR_TYPES: tuple[str, ...] = tuple(det_rules())
# problems only neuron-monitor-det infers (no single report shows them)
HANG_SUSPECTED = "hang_suspected"
RUNTIME_VANISHED = "runtime_vanished"
INFERRED_TYPES: tuple[str, ...] = (HANG_SUSPECTED, RUNTIME_VANISHED)
# host data, left out by --ignore-host
HOST_TYPES: frozenset[str] = frozenset(t.category for spec in registry().all() for t in spec.tracks if t.host)
EVENT_GROUPS: dict[str, tuple[str, ...]] = {
    "counters": COUNTER_TYPES,
    "errors": ERROR_TYPES,
    "problems": (*ERROR_TYPES, *INFERRED_TYPES),
}
ALL_TYPES: tuple[str, ...] = (*COUNTER_TYPES, *SLICE_TYPES, *ERROR_TYPES, *INFERRED_TYPES)


def parse_core_list(text: str) -> frozenset[int]:
    """``"0,2-5"`` -> {0, 2, 3, 4, 5}."""
    cores: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise ValueError(f"bad NeuronCore list {text!r}: {part!r} is not N or N-M") from None
        if first < 0 or last < first:
            raise ValueError(f"bad NeuronCore range {part!r} in {text!r}")
        cores.update(range(first, last + 1))
    if not cores:
        raise ValueError(f"empty NeuronCore list {text!r}")
    return frozenset(cores)


def parse_event_types(text: str) -> frozenset[str]:
    """``"errors,^transient_error,latency"`` -> the set of event types it names."""
    chosen: set[str] = set()
    removed: set[str] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        target = removed if part.startswith("^") else chosen
        name = part.lstrip("^")
        if name in EVENT_GROUPS:
            target.update(EVENT_GROUPS[name])
        elif name in ALL_TYPES:
            target.add(name)
        else:
            known = ", ".join((*EVENT_GROUPS, *ALL_TYPES))
            raise ValueError(f"unknown event type {name!r} (known: {known})")
    if not chosen and not removed:
        raise ValueError(f"empty event type list {text!r}")
    base = chosen if chosen else set(ALL_TYPES)
    return frozenset(base - removed)


def parse_instances(text: str) -> frozenset[str]:
    ids = frozenset(p.strip() for p in text.split(",") if p.strip())
    if not ids:
        raise ValueError(f"empty instance id list {text!r}")
    return ids


def parse_time(text: str) -> float:
    """Epoch seconds, or an ISO 8601 date and time (UTC unless it names a zone) -> epoch seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"bad time {text!r}: give epoch seconds or an ISO date and time (2026-01-01T12:00:00)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def format_cores(cores: tuple[int, ...] | list[int] | frozenset[int]) -> str:
    """{0, 2, 3, 4, 5} -> "0,2-5" (the inverse of parse_core_list)."""
    out: list[str] = []
    ordered = sorted(cores)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class Selection:
    cores: frozenset[int] | None = None  # None: every NeuronCore
    event_types: frozenset[str] | None = None  # None: every type
    instances: frozenset[str] | None = None  # None: every instance
    ignore_host: bool = False
    start: float | None = None  # reports before this time (epoch seconds) are left out
    end: float | None = None  # reports after it too

    @classmethod
    def from_options(
        cls,
        cores: str | None,
        event_types: str | None,
        instances: str | None,
        ignore_host: bool,
        start: str | None = None,
        end: str | None = None,
    ) -> Selection:
        sel = cls(
            cores=parse_core_list(cores) if cores is not None else None,
            event_types=parse_event_types(event_types) if event_types is not None else None,
            instances=parse_instances(instances) if instances is not None else None,
            ignore_host=ignore_host,
            start=parse_time(start) if start is not None else None,
            end=parse_time(end) if end is not None else None,
        )
        if sel.start is not None and sel.end is not None and sel.end < sel.start:
            raise ValueError("the end of the time range is before its start")
        return sel

    def wants_time(self, t: float) -> bool:
        return (self.start is None or t >= self.start) and (self.end is None or t <= self.end)

    def wants_type(self, event_type: str) -> bool:
        if self.ignore_host and event_type in HOST_TYPES:
            return False
        return self.event_types is None or event_type in self.event_types

    def wants_instance(self, instance: str) -> bool:
        return self.instances is None or instance in self.instances

    def wants_core(self, core: int) -> bool:
        return self.cores is None or core in self.cores

    def wants_any_core(self, cores: tuple[int, ...] | list[int] | range) -> bool:
        """A runtime or device is kept when one of its cores is selected (or when it has none to judge by)."""
        if self.cores is None or not cores:
            return True
        return any(c in self.cores for c in cores)
