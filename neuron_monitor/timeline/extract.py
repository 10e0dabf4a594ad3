"""One report (a parsed JSON object) -> a ``Snapshot``: the values the timeline tools use, typed and checked.

Reads AWS's report shape plus our additive ``report_time`` and per-group ``fresh`` through the schema's read layer
(``neuron_monitor.schema``). Returns plain dataclasses; knows nothing about traces or problems. Each usable group
object becomes a ``GroupPart``: its spec, freshness, period, typed value and the samples of its spec's timeline
tracks (what the trace writer places) -- det asks the spec for its findings of fresh parts. A runtime also keeps
what neuron-monitor-det's own inferences (a hang, a runtime that vanished) and the trace's runtime slices need:
its cores, loaded models, utilization and executions. A group that is missing, has an ``error``, or has a
malformed value is left out, never raised on. A report without ``fresh`` (AWS's own neuron-monitor) counts every
group as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.groups.execution_stats import spec as execution_spec
from neuron_monitor.groups.execution_stats.spec import ExecutionStats
from neuron_monitor.groups.memory_used.spec import MemoryUsed
from neuron_monitor.groups.neuroncore_counters.spec import NeuroncoreCounters
from neuron_monitor.schema import names as N
from neuron_monitor.schema.display import count as _count
from neuron_monitor.schema.display import finite as _finite
from neuron_monitor.schema.read import Group, RuntimeEntry, read_report
from neuron_monitor.schema.spec import DetFinding, GroupSpec, TimelineSample
from neuron_monitor.schema.values import index

MEMORY_CATEGORIES: tuple[str, ...] = N.MEMORY_CATEGORIES


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
class Execution:
    """A fresh execution_stats period of one runtime."""

    period: float
    completed: int
    executions: int  # every execution that ended (completed, with an error, or timed out)
    errors: dict[str, int]  # event type -> count (only the non-zero ones)
    latency_p50: float | None  # total latency, seconds
    latency_p99: float | None
    device_p50: float | None
    device_p99: float | None


@dataclass(slots=True)
class Runtime:
    pid: int
    tag: str
    error: str
    cores: tuple[int, ...]  # global NeuronCore indices the runtime works on
    core_period: float | None = None  # neuroncore_counters period, when fresh
    utilization: dict[int, float] | None = None  # global NC -> percent (latest, fresh or carried over)
    memory: dict[int, dict[str, int]] | None = None  # global NC -> category -> bytes
    models: int | None = None  # loaded models, None when memory_used is absent
    running_models: int = 0
    execution: Execution | None = None  # only when execution_stats is fresh
    groups: list[GroupPart] = field(default_factory=list)  # usable groups, in timeline order

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


def _usable(group: Group | None) -> Group | None:
    """The group if present and without error."""
    return group if group is not None and not group.error else None


def _period(group: Group) -> float:
    p = _finite(group.period)
    return p if p is not None and p > 0 else 0.0


def _percentile(latency: dict[str, dict[str, float]], kind: str, pct: str) -> float | None:
    return _finite(latency.get(kind, {}).get(pct))


def parse_execution(stats: ExecutionStats, period: float) -> Execution:
    completed, executions = execution_spec.executions(stats)
    latency = stats.latency()
    return Execution(
        period=period,
        completed=completed,
        executions=executions,
        errors=execution_spec.period_errors(stats),
        latency_p50=_percentile(latency, N.TOTAL_LATENCY, "p50"),
        latency_p99=_percentile(latency, N.TOTAL_LATENCY, "p99"),
        device_p50=_percentile(latency, N.DEVICE_LATENCY, "p50"),
        device_p99=_percentile(latency, N.DEVICE_LATENCY, "p99"),
    )


def _parse_memory(rt: Runtime, memory: MemoryUsed, per_device: int) -> set[int]:
    """Fill the runtime's memory fields; return the cores its loaded models sit on."""
    if memory.per_core is not None:
        per_core: dict[int, dict[str, int]] = {}
        for key, cats in memory.per_core.items():
            core = index(key)
            if core is not None:
                per_core[core] = {c: _count(cats.get(c)) for c in MEMORY_CATEGORIES}
        rt.memory = per_core
    model_cores: set[int] = set()
    if memory.models is not None:
        rt.models = memory.model_count
        for m in memory.models:
            if m.running:
                rt.running_models += 1
            model_cores.update(nd * per_device + nc for nd, nc in m.placement)
    return model_cores


def _by_index(values: dict[str, float]) -> dict[int, float]:
    out: dict[int, float] = {}
    for key, v in values.items():
        core = index(key)
        if core is not None and v - v == 0.0:
            out[core] = v
    return out


def parse_runtime(entry: RuntimeEntry, per_device: int) -> Runtime | None:
    """One runtime entry as the timeline sees it; None when its pid is not an integer."""
    if entry.pid is None:
        return None
    rt = Runtime(pid=entry.pid, tag=entry.tag, error=entry.error, cores=())
    groups = entry.groups
    in_use: set[int] = set()
    ncc = _usable(groups.get(N.NEURONCORE_COUNTERS))
    counters = ncc.data_as(NeuroncoreCounters) if ncc is not None else None
    if ncc is not None and counters is not None:
        in_use = {c for c in (index(k) for k in counters.cores) if c is not None}
        rt.utilization = _by_index(counters.utilization())
        if ncc.fresh:
            rt.core_period = _period(ncc)
    model_cores: set[int] = set()
    mem = _usable(groups.get(N.MEMORY_USED))
    memory = mem.data_as(MemoryUsed) if mem is not None else None
    if memory is not None:
        model_cores = _parse_memory(rt, memory, per_device)
    ex = _usable(groups.get(N.EXECUTION_STATS))
    stats = ex.data_as(ExecutionStats) if ex is not None else None
    if ex is not None and stats is not None and ex.fresh:
        rt.execution = parse_execution(stats, _period(ex))
    rt.groups = _parts(groups)
    # the cores a runtime works on: where its models are loaded; else where it holds memory; else in use
    if model_cores:
        rt.cores = tuple(sorted(model_cores))
    elif rt.memory:
        rt.cores = tuple(sorted(c for c, cats in rt.memory.items() if any(cats.values()))) or tuple(sorted(in_use))
    else:
        rt.cores = tuple(sorted(in_use))
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
