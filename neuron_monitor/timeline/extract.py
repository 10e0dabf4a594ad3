"""One report (a parsed JSON object) -> a ``Snapshot``: the values the timeline tools use, typed and checked.

Reads AWS's report shape plus our additive ``report_time`` and per-group ``fresh`` through the schema's read layer
(``neuron_monitor.schema``). Returns plain dataclasses; knows nothing about traces or problems, and no group by
name. Each usable group object becomes a ``GroupPart``: its spec, freshness, period, typed value and the samples of
its spec's timeline tracks (what the trace writer places) -- det asks the spec for its findings of fresh parts. A
runtime also keeps what its groups tell about it (``GroupSpec.runtime_facts``: its cores, loaded models,
utilization, executions), which neuron-monitor-det's own inferences (a hang, a runtime that vanished) and the
trace's runtime slices need. A group that is missing, has an ``error``, or has a malformed value is left out, never
raised on. A report without ``fresh`` (AWS's own neuron-monitor) counts every group as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.schema import names as N
from neuron_monitor.schema.display import finite as _finite
from neuron_monitor.schema.read import Group, RuntimeEntry, read_report
from neuron_monitor.schema.spec import DetFinding, GroupSpec, RuntimeFacts, TimelineSample, merge_facts


@dataclass(slots=True)
class GroupPart:
    """One usable group object of a report, as the timeline tools see it."""

    spec: GroupSpec[Any]
    fresh: bool
    period: float  # the group's period (seconds), 0.0 when missing or not positive
    value: Any  # the spec's typed value
    samples: list[TimelineSample]  # the values of the spec's timeline tracks

    def findings(self) -> list[DetFinding]:
        """What the group says for its spec's det rules (fresh groups only: each period is judged once)."""
        return list(self.spec.findings(self.value)) if self.fresh else []


@dataclass(slots=True)
class Runtime:
    pid: int
    tag: str
    error: str
    groups: list[GroupPart] = field(default_factory=list)  # usable groups, in timeline order
    facts: RuntimeFacts = field(default_factory=RuntimeFacts)  # what its groups tell (``GroupSpec.runtime_facts``)
    cores: tuple[int, ...] = ()  # global NeuronCore indices the runtime works on (``RuntimeFacts.cores``)

    @property
    def models(self) -> int | None:
        """Loaded models; None when no group lists them."""
        return self.facts.models

    @property
    def key(self) -> tuple[int, str]:
        """A runtime's identity within an instance (one process may appear under two tags)."""
        return (self.pid, self.tag)

    @property
    def name(self) -> str:
        return f"{self.tag}[{self.pid}]" if self.tag and self.tag != str(self.pid) else f"pid {self.pid}"


@dataclass(slots=True)
class Snapshot:
    time: float  # report_time, epoch seconds
    instance: str  # instance_id, or the recording's name when the report has none
    instance_type: str
    cores_per_device: int
    runtimes: list[Runtime]
    system: list[GroupPart] = field(default_factory=list)  # usable system groups, in timeline order
    problems: list[str] = field(default_factory=list)  # what could not be read


def _period(group: Group) -> float:
    p = _finite(group.period)
    return p if p is not None and p > 0 else 0.0


def parse_runtime(entry: RuntimeEntry, per_device: int) -> Runtime | None:
    """One runtime entry as the timeline sees it; None when its pid is not an integer."""
    if entry.pid is None:
        return None
    rt = Runtime(pid=entry.pid, tag=entry.tag, error=entry.error, groups=_parts(entry.groups))
    rt.facts = merge_facts(p.spec.runtime_facts(p.value, p.period if p.fresh else None, per_device) for p in rt.groups)
    rt.cores = rt.facts.cores()
    return rt


def _parts(groups: dict[str, Group]) -> list[GroupPart]:
    """The usable groups, ordered as the timeline places them (``GroupSpec.timeline_order``, then name)."""
    parts: list[GroupPart] = []
    for group in sorted(groups.values(), key=lambda g: (g.spec.timeline_order, g.name)):
        if group.usable:
            value = group.data()
            timeline = group.spec.timeline
            samples = list(timeline(value)) if timeline is not None else []
            parts.append(GroupPart(group.spec, group.fresh, _period(group), value, samples))
    return parts


def parse_snapshot(report: dict[str, Any], time: float, source: str) -> Snapshot:
    """``time`` is the report's time (``report_time`` or a stand-in); ``source`` names a report without instance id.

    The report is read through the schema's read layer; wrong-typed values are left out, never raised on."""
    read = read_report(report)
    info = read.instance_info
    per_device = read.cores_per_device or 1
    snap = Snapshot(
        time=time,
        instance=(info and info.instance_id) or source,
        instance_type=(info and info.instance_type) or "",
        cores_per_device=per_device,
        runtimes=[],
    )
    entries = report.get(N.NEURON_RUNTIME_DATA)
    unread = (len(entries) - len(read.runtimes)) if isinstance(entries, list) else 0
    snap.problems.extend(["a runtime entry without a numeric pid"] * unread)  # entries that are not objects
    seen: set[tuple[int, str]] = set()
    for entry in read.runtimes:
        rt = parse_runtime(entry, per_device)
        if rt is None:
            snap.problems.append("a runtime entry without a numeric pid")
            continue
        if rt.key in seen:  # the same runtime twice in one report: keep the first
            continue
        seen.add(rt.key)
        snap.runtimes.append(rt)
    snap.system = _parts(read.system)
    return snap
