"""One report (a parsed JSON object) -> a ``Snapshot``: the values the timeline tools use, typed and checked.

Reads AWS's report shape plus our additive ``report_time`` and per-group ``fresh``. Returns plain dataclasses;
knows nothing about traces or problems. A group that is missing, has an ``error``, or has a malformed value is
left out (its field is ``None``), never raised on. Per-period counters (execution_stats, neuron_hw_counters) are
kept only when their group is fresh, so each count is seen once; a report without ``fresh`` (AWS's own
neuron-monitor) counts every group as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# event types taken from execution_stats.error_summary: event type -> key
ERROR_SUMMARY_TYPES: dict[str, str] = {
    "generic_error": "generic",
    "numerical_error": "numerical",
    "transient_error": "transient",
    "model_error": "model",
    "runtime_error": "runtime",
    "hardware_error": "hardware",
}
# event types taken from execution_stats.execution_summary: event type -> key
EXECUTION_SUMMARY_TYPES: dict[str, str] = {
    "timed_out": "timed_out",
    "incorrect_input": "incorrect_input",
    "failed_to_queue": "failed_to_queue",
}
# completed_with_err counts executions that ended in an error other than a numerical one; the part of it that
# error_summary does not already explain becomes "execution_error"
EXECUTION_ERROR = "execution_error"
RUNTIME_ERROR_TYPES: tuple[str, ...] = (*ERROR_SUMMARY_TYPES, *EXECUTION_SUMMARY_TYPES, EXECUTION_ERROR)
ECC_UNCORRECTED = "ecc_uncorrected"

MEMORY_CATEGORIES: tuple[str, ...] = (
    "constants",
    "model_code",
    "model_shared_scratchpad",
    "runtime_memory",
    "tensors",
)
HOST_CPU_FIELDS: tuple[str, ...] = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq")


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


def _num(v: Any) -> float | None:
    """A finite JSON number as float, else None (bools, strings, NaN and infinities are not numbers here)."""
    t = type(v)
    if t is float:
        return v if v - v == 0.0 else None  # inf - inf and nan - nan are nan
    if t is int:
        return float(v)
    return None


def _count(v: Any) -> int:
    """A non-negative count (anything else counts as 0)."""
    t = type(v)
    if t is int:
        return v if v > 0 else 0
    if t is float and v - v == 0.0:
        return int(v) if v > 0 else 0
    return 0


def _group(parent: Any, name: str) -> dict[str, Any] | None:
    """The group object if present and without error."""
    if not isinstance(parent, dict):
        return None
    g = parent.get(name)
    if not isinstance(g, dict) or g.get("error"):
        return None
    return g


def _mapping(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _fresh(g: dict[str, Any]) -> bool:
    return g.get("fresh", True) is not False


def _period(g: dict[str, Any]) -> float:
    p = _num(g.get("period"))
    return p if p is not None and p > 0 else 0.0


def _index(key: Any) -> int | None:
    try:
        i = int(key)
    except (TypeError, ValueError):
        return None
    return i if i >= 0 else None


def _percentile(lat: Any, key: str) -> float | None:
    return _num(lat.get(key)) if isinstance(lat, dict) else None


def parse_execution(g: dict[str, Any]) -> Execution:
    es = _mapping(g.get("error_summary"))
    xs = _mapping(g.get("execution_summary"))
    errors: dict[str, int] = {}
    for etype, key in ERROR_SUMMARY_TYPES.items():
        n = _count(es.get(key))
        if etype == "numerical_error":
            n = max(n, _count(xs.get("completed_with_num_err")))
        if n:
            errors[etype] = n
    for etype, key in EXECUTION_SUMMARY_TYPES.items():
        n = _count(xs.get(key))
        if n:
            errors[etype] = n
    explained = sum(_count(es.get(k)) for k in ("generic", "model", "runtime", "hardware"))
    unexplained = _count(xs.get("completed_with_err")) - explained
    if unexplained > 0:
        errors[EXECUTION_ERROR] = unexplained
    completed = _count(xs.get("completed"))
    executions = completed + sum(
        _count(xs.get(k)) for k in ("completed_with_err", "completed_with_num_err", "timed_out")
    )
    lat = _mapping(g.get("latency_stats"))
    total, device = lat.get("total_latency"), lat.get("device_latency")
    return Execution(
        period=_period(g),
        completed=completed,
        executions=executions,
        errors=errors,
        latency_p50=_percentile(total, "p50"),
        latency_p99=_percentile(total, "p99"),
        device_p50=_percentile(device, "p50"),
        device_p99=_percentile(device, "p99"),
    )


def _parse_memory(rt: Runtime, g: dict[str, Any], per_device: int) -> set[int]:
    """Fill the runtime's memory fields; return the cores its loaded models sit on."""
    used = g.get("neuron_runtime_used_bytes")
    if isinstance(used, dict):
        host = _num(used.get("host"))
        rt.host_memory = int(host) if host is not None else None
        breakdown = used.get("usage_breakdown")
        per_core = breakdown.get("neuroncore_memory_usage") if isinstance(breakdown, dict) else None
        if isinstance(per_core, dict):
            memory: dict[int, dict[str, int]] = {}
            for key, cats in per_core.items():
                core = _index(key)
                if core is None or not isinstance(cats, dict):
                    continue
                memory[core] = {c: _count(cats.get(c)) for c in MEMORY_CATEGORIES}
            rt.memory = memory
    model_cores: set[int] = set()
    models = g.get("loaded_models")
    if isinstance(models, list):
        rt.models = len(models)
        for m in models:
            if not isinstance(m, dict):
                continue
            if m.get("is_running") is True:
                rt.running_models += 1
            subgraphs = m.get("subgraphs")
            if not isinstance(subgraphs, dict):
                continue
            for sg in subgraphs.values():
                if not isinstance(sg, dict):
                    continue
                nc, nd = _index(sg.get("neuroncore_index")), _index(sg.get("neuron_device_index"))
                if nc is not None and nd is not None:
                    model_cores.add(nd * per_device + nc)
    return model_cores


def parse_runtime(entry: dict[str, Any], per_device: int) -> Runtime | None:
    pid = entry.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int):
        return None
    tag = entry.get("neuron_runtime_tag")
    rt = Runtime(pid=pid, tag=str(tag) if tag is not None else str(pid), error=str(entry.get("error") or ""), cores=())
    report = entry.get("report")
    in_use: set[int] = set()
    ncc = _group(report, "neuroncore_counters")
    if ncc is not None and isinstance(ncc.get("neuroncores_in_use"), dict):
        util: dict[int, float] = {}
        flops: dict[int, float] = {}
        for key, data in ncc["neuroncores_in_use"].items():
            core = _index(key)
            if core is None or not isinstance(data, dict):
                continue
            in_use.add(core)
            u = _num(data.get("neuroncore_utilization"))
            if u is not None:
                util[core] = u
            f = _num(data.get("flops"))
            if f is not None:
                flops[core] = f
        rt.utilization, rt.flops = util, flops
        if _fresh(ncc):
            rt.core_period = _period(ncc)
    model_cores: set[int] = set()
    mem = _group(report, "memory_used")
    if mem is not None:
        model_cores = _parse_memory(rt, mem, per_device)
    ex = _group(report, "execution_stats")
    if ex is not None and _fresh(ex):
        rt.execution = parse_execution(ex)
    cpu = _group(report, "neuron_runtime_vcpu_usage")
    if cpu is not None and isinstance(cpu.get("vcpu_usage"), dict):
        user, system = _num(cpu["vcpu_usage"].get("user")), _num(cpu["vcpu_usage"].get("system"))
        if user is not None and system is not None:
            rt.vcpu = (user, system)
            if _fresh(cpu):
                rt.vcpu_period = _period(cpu)
    # the cores a runtime works on: where its models are loaded; else where it holds memory; else in use
    if model_cores:
        rt.cores = tuple(sorted(model_cores))
    elif rt.memory:
        rt.cores = tuple(sorted(c for c, cats in rt.memory.items() if any(cats.values()))) or tuple(sorted(in_use))
    else:
        rt.cores = tuple(sorted(in_use))
    return rt


def _parse_system(snap: Snapshot, system: Any) -> None:
    cpu = _group(system, "vcpu_usage")
    if cpu is not None and isinstance(cpu.get("average_usage"), dict):
        avg = cpu["average_usage"]
        values = {k: _num(avg.get(k)) for k in HOST_CPU_FIELDS}
        snap.host_cpu = {k: v for k, v in values.items() if v is not None}
        if _fresh(cpu):
            snap.host_cpu_period = _period(cpu)
    mem = _group(system, "memory_info")
    if mem is not None:
        fields = ("memory_total_bytes", "memory_used_bytes", "swap_total_bytes", "swap_used_bytes")
        snap.host_memory = {k: _count(mem.get(k)) for k in fields if _num(mem.get(k)) is not None}
    hw = _group(system, "neuron_hw_counters")
    if hw is not None and _fresh(hw) and isinstance(hw.get("neuron_devices"), list):
        ecc: dict[int, dict[str, int]] = {}
        for dev in hw["neuron_devices"]:
            if not isinstance(dev, dict):
                continue
            index = _index(dev.get("neuron_device_index"))
            if index is not None:
                ecc[index] = {
                    "mem": _count(dev.get("mem_ecc_uncorrected")),
                    "sram": _count(dev.get("sram_ecc_uncorrected")),
                }
        snap.ecc = ecc
        snap.ecc_period = _period(hw)


def parse_snapshot(report: dict[str, Any], time: float, source: str) -> Snapshot:
    """``time`` is the report's time (``report_time`` or a stand-in); ``source`` names a report without instance id."""
    info = _mapping(report.get("instance_info"))
    hw = _mapping(report.get("neuron_hardware_info"))
    per_device = _count(hw.get("neuroncore_per_device_count")) or 1
    snap = Snapshot(
        time=time,
        instance=str(info.get("instance_id") or source),
        instance_type=str(info.get("instance_type") or ""),
        cores_per_device=per_device,
        runtimes=[],
    )
    entries = report.get("neuron_runtime_data")
    if isinstance(entries, list):
        seen: set[tuple[int, str]] = set()
        for entry in entries:
            rt = parse_runtime(entry, per_device) if isinstance(entry, dict) else None
            if rt is None:
                snap.problems.append("a runtime entry without a numeric pid")
                continue
            if rt.key in seen:  # the same runtime twice in one report: keep the first
                continue
            seen.add(rt.key)
            snap.runtimes.append(rt)
    _parse_system(snap, report.get("system_data"))
    return snap
