"""One report (a parsed JSON object) -> a ``Snapshot``: the values the timeline tools use, typed and checked.

Reads AWS's report shape plus our additive ``report_time`` and per-group ``fresh`` through the schema's read layer
(``neuron_monitor.schema``). Returns plain dataclasses;
knows nothing about traces or problems. A group that is missing, has an ``error``, or has a malformed value is
left out (its field is ``None``), never raised on. Per-period counters (execution_stats, neuron_hw_counters) are
kept only when their group is fresh, so each count is seen once; a report without ``fresh`` (AWS's own
neuron-monitor) counts every group as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.groups.execution_stats.spec import ExecutionStats
from neuron_monitor.groups.memory_info.spec import MemoryInfo
from neuron_monitor.groups.memory_used.spec import MemoryUsed
from neuron_monitor.groups.neuron_hw_counters.spec import NeuronHwCounters
from neuron_monitor.groups.neuron_runtime_vcpu_usage.spec import RuntimeVcpuUsage
from neuron_monitor.groups.neuroncore_counters.spec import NeuroncoreCounters
from neuron_monitor.groups.vcpu_usage.spec import VcpuUsage
from neuron_monitor.schema import names as N
from neuron_monitor.schema.read import Group, Report, RuntimeEntry, index, read_report
from neuron_monitor.schema.spec import TimelineSample

# event types taken from execution_stats.error_summary: event type -> key
ERROR_SUMMARY_TYPES: dict[str, str] = {
    "generic_error": N.ERROR_GENERIC,
    "numerical_error": N.ERROR_NUMERICAL,
    "transient_error": N.ERROR_TRANSIENT,
    "model_error": N.ERROR_MODEL,
    "runtime_error": N.ERROR_RUNTIME,
    "hardware_error": N.ERROR_HARDWARE,
}
# event types taken from execution_stats.execution_summary: event type -> key
EXECUTION_SUMMARY_TYPES: dict[str, str] = {
    "timed_out": N.STATUS_TIMED_OUT,
    "incorrect_input": N.STATUS_INCORRECT_INPUT,
    "failed_to_queue": N.STATUS_FAILED_TO_QUEUE,
}
# completed_with_err counts executions that ended in an error other than a numerical one; the part of it that
# error_summary does not already explain becomes "execution_error"
EXECUTION_ERROR = "execution_error"
RUNTIME_ERROR_TYPES: tuple[str, ...] = (*ERROR_SUMMARY_TYPES, *EXECUTION_SUMMARY_TYPES, EXECUTION_ERROR)
ECC_UNCORRECTED = "ecc_uncorrected"

MEMORY_CATEGORIES: tuple[str, ...] = N.MEMORY_CATEGORIES
HOST_CPU_FIELDS: tuple[str, ...] = N.CPU_MODES


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
    physical: dict[int, dict[str, float]] | None = None  # global NC -> physical core name -> percent (LNC > 1)
    flops: dict[int, float] | None = None
    memory: dict[int, dict[str, int]] | None = None  # global NC -> category -> bytes
    host_memory: int | None = None
    models: int | None = None  # loaded models, None when memory_used is absent
    running_models: int = 0
    execution: Execution | None = None  # only when execution_stats is fresh
    vcpu: tuple[float, float] | None = None  # user, system percent
    vcpu_period: float | None = None  # neuron_runtime_vcpu_usage period, when fresh

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
    host_cpu: dict[str, float] | None = None  # average_usage, percent
    host_cpu_period: float | None = None  # when vcpu_usage is fresh
    host_memory: dict[str, int] | None = None  # memory_info fields
    ecc: dict[int, dict[str, int]] | None = None  # device -> uncorrected counts, when neuron_hw_counters is fresh
    ecc_period: float | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read
    # samples of the tracks of groups with a spec ``timeline`` (groups added after the first seven):
    # (runtime name or "" for a system group, sample)
    tracks: list[tuple[str, TimelineSample]] = field(default_factory=list)


def _finite(v: float | None) -> float | None:
    """A finite number, else None (NaN and infinities, which a JSON parser other than orjson may let through)."""
    return v if v is not None and v - v == 0.0 else None


def _count(v: float | None) -> int:
    """A non-negative count (anything else counts as 0)."""
    return int(v) if v is not None and v - v == 0.0 and v > 0 else 0


def _usable(group: Group | None) -> Group | None:
    """The group if present and without error."""
    return group if group is not None and not group.error else None


def _period(group: Group) -> float:
    p = _finite(group.period)
    return p if p is not None and p > 0 else 0.0


def _percentile(latency: dict[str, dict[str, float]], kind: str, pct: str) -> float | None:
    return _finite(latency.get(kind, {}).get(pct))


def parse_execution(stats: ExecutionStats, period: float) -> Execution:
    es = stats.error_summary or {}
    xs = stats.execution_summary or {}
    errors: dict[str, int] = {}
    for etype, key in ERROR_SUMMARY_TYPES.items():
        n = _count(es.get(key))
        if etype == "numerical_error":
            n = max(n, _count(xs.get(N.STATUS_COMPLETED_WITH_NUM_ERR)))
        if n:
            errors[etype] = n
    for etype, key in EXECUTION_SUMMARY_TYPES.items():
        n = _count(xs.get(key))
        if n:
            errors[etype] = n
    explained = sum(_count(es.get(k)) for k in (N.ERROR_GENERIC, N.ERROR_MODEL, N.ERROR_RUNTIME, N.ERROR_HARDWARE))
    unexplained = _count(xs.get(N.STATUS_COMPLETED_WITH_ERR)) - explained
    if unexplained > 0:
        errors[EXECUTION_ERROR] = unexplained
    completed = _count(xs.get(N.STATUS_COMPLETED))
    executions = completed + sum(
        _count(xs.get(k)) for k in (N.STATUS_COMPLETED_WITH_ERR, N.STATUS_COMPLETED_WITH_NUM_ERR, N.STATUS_TIMED_OUT)
    )
    latency = stats.latency()
    return Execution(
        period=period,
        completed=completed,
        executions=executions,
        errors=errors,
        latency_p50=_percentile(latency, N.TOTAL_LATENCY, "p50"),
        latency_p99=_percentile(latency, N.TOTAL_LATENCY, "p99"),
        device_p50=_percentile(latency, N.DEVICE_LATENCY, "p50"),
        device_p99=_percentile(latency, N.DEVICE_LATENCY, "p99"),
    )


def _parse_memory(rt: Runtime, memory: MemoryUsed, per_device: int) -> set[int]:
    """Fill the runtime's memory fields; return the cores its loaded models sit on."""
    host = _finite(memory.host)
    rt.host_memory = int(host) if host is not None else None
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
        rt.flops = _by_index(counters.flops)
        rt.physical = {
            core: {name: v for name, v in phys.items() if v - v == 0.0}
            for key, phys in counters.physical().items()
            if (core := index(key)) is not None and phys
        }
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
    cpu = _usable(groups.get(N.NEURON_RUNTIME_VCPU_USAGE))
    usage = cpu.data_as(RuntimeVcpuUsage) if cpu is not None else None
    if cpu is not None and usage is not None and usage.usage is not None:
        user, system = _finite(usage.usage.get(N.CPU_USER)), _finite(usage.usage.get(N.CPU_SYSTEM))
        if user is not None and system is not None:
            rt.vcpu = (user, system)
            if cpu.fresh:
                rt.vcpu_period = _period(cpu)
    # the cores a runtime works on: where its models are loaded; else where it holds memory; else in use
    if model_cores:
        rt.cores = tuple(sorted(model_cores))
    elif rt.memory:
        rt.cores = tuple(sorted(c for c, cats in rt.memory.items() if any(cats.values()))) or tuple(sorted(in_use))
    else:
        rt.cores = tuple(sorted(in_use))
    return rt


def _parse_system(snap: Snapshot, system: dict[str, Group]) -> None:
    cpu = _usable(system.get(N.VCPU_USAGE))
    usage = cpu.data_as(VcpuUsage) if cpu is not None else None
    if cpu is not None and usage is not None and usage.average is not None:
        values = {k: _finite(usage.average.get(k)) for k in HOST_CPU_FIELDS}
        snap.host_cpu = {k: v for k, v in values.items() if v is not None}
        if cpu.fresh:
            snap.host_cpu_period = _period(cpu)
    mem = _usable(system.get(N.MEMORY_INFO))
    info = mem.data_as(MemoryInfo) if mem is not None else None
    if info is not None:
        snap.host_memory = {
            k: _count(v) for k in N.MEMORY_INFO_FIELDS if (v := _finite(info.fields.get(k))) is not None
        }
    hw = _usable(system.get(N.NEURON_HW_COUNTERS))
    counters = hw.data_as(NeuronHwCounters) if hw is not None else None
    if hw is not None and counters is not None and hw.fresh and isinstance(hw.body.get(N.NEURON_DEVICES), list):
        ecc: dict[int, dict[str, int]] = {}
        for dev in counters.devices:
            if dev.index is not None:
                ecc[dev.index] = {
                    "mem": _count(dev.events.get(N.MEM_ECC_UNCORRECTED)),
                    "sram": _count(dev.events.get(N.SRAM_ECC_UNCORRECTED)),
                }
        snap.ecc = ecc
        snap.ecc_period = _period(hw)


def parse_snapshot(report: dict[str, Any], time: float, source: str) -> Snapshot:
    """``time`` is the report's time (``report_time`` or a stand-in); ``source`` names a report without instance id.

    The report is read through the schema's read layer; wrong-typed values are left out, never raised on."""
    read = read_report(report)
    info = read.instance_info or {}
    per_device = read.cores_per_device or 1
    snap = Snapshot(
        time=time,
        instance=str(info.get("instance_id") or source),
        instance_type=str(info.get("instance_type") or ""),
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
    _parse_system(snap, read.system)
    _spec_tracks(snap, read)
    return snap


def _spec_tracks(snap: Snapshot, read: Report) -> None:
    """The samples of the groups whose spec declares its own timeline values (usable, fresh groups only)."""
    names = {rt.key: rt.name for rt in snap.runtimes}
    sources = [("", g) for g in read.system.values()]
    for entry in read.runtimes:
        if entry.pid is not None and (entry.pid, entry.tag) in names:
            sources += [(names[(entry.pid, entry.tag)], g) for g in entry.groups.values()]
    for owner, group in sources:
        timeline = group.spec.timeline
        if timeline is not None and group.usable and group.fresh:
            snap.tracks.extend((owner, sample) for sample in timeline(group.data()))
