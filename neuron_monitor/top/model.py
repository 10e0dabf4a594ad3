"""The screen model: one neuron-monitor report -> what `neuron-monitor-top` shows, with no terminal involved.

`screen_from_report` reads a report (a parsed JSON object, AWS's format plus our additive keys) through the
project's typed read layer (`neuron_monitor.schema.read`) and returns a `Screen`: host, per-device and per-core
rows, runtimes, and the errors the report carries (with the read layer's problems: a value of the wrong type is
left out and named, never raised on). A tag filter keeps only matching runtimes, and the
device and core figures are then those of the matching runtimes.

Figures: a core's utilization is the sum over the runtimes using it (capped at 100 %); a device's is the mean over
all of its logical cores (cores no runtime reports count as idle). Device memory is the sum of the runtimes'
`neuroncore_memory_usage` categories over the device's cores; the total is `neuron_device_memory_size` when the
report has it. Executions/s is `completed` over the group's period; errors are the period's `error_summary` total.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.groups.execution_stats.spec import ExecutionStats
from neuron_monitor.groups.memory_info.spec import MemoryInfo
from neuron_monitor.groups.memory_used.spec import MemoryUsed
from neuron_monitor.groups.neuron_device_telemetry import spec as telemetry_spec
from neuron_monitor.groups.neuron_device_telemetry.spec import NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters.spec import NeuronHwCounters
from neuron_monitor.groups.neuron_runtime_vcpu_usage.spec import RuntimeVcpuUsage
from neuron_monitor.groups.neuroncore_counters.spec import NeuroncoreCounters
from neuron_monitor.groups.vcpu_usage.spec import VcpuUsage
from neuron_monitor.schema import names as N
from neuron_monitor.schema.read import Group, Report, RuntimeEntry, index, read_report

# the order of the memory bar's runs; categories a newer report adds follow these
MEMORY_CATEGORIES = (
    N.MEMORY_MODEL_CODE,
    N.MEMORY_TENSORS,
    N.MEMORY_CONSTANTS,
    N.MEMORY_MODEL_SHARED_SCRATCHPAD,
    N.MEMORY_RUNTIME_MEMORY,
)
TELEMETRY_GROUP = telemetry_spec.NAME
# neuron_hardware_info and instance_info keys (the schema's names cover the groups only)
DEVICE_COUNT = "neuron_device_count"
DEVICE_MEMORY_SIZE = "neuron_device_memory_size"
DEVICE_TYPE = "neuron_device_type"
LNC = "logical_neuroncore_config"


@dataclass(frozen=True)
class Host:
    vcpu_count: int = 0
    vcpu_busy: float | None = None  # percent of all vCPU time that was not idle
    vcpu_user: float | None = None
    vcpu_system: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    swap_used: int | None = None
    swap_total: int | None = None


@dataclass(frozen=True)
class Telemetry:
    """A device's telemetry (the `neuron_device_telemetry` group), when the report has it."""

    power_status: str | None = None  # VALID, NO_DATA, INVALID
    power_avg: float | None = None  # percent
    power_max: float | None = None
    unhealthy: tuple[str, ...] | None = None  # None: health not reported; (): healthy


@dataclass(frozen=True)
class Device:
    index: int
    utilization: float | None  # percent; None: no core utilization in the report at all
    cores: tuple[int, ...]
    memory: dict[str, int]  # category -> bytes
    memory_total: int | None
    ecc: dict[str, int]  # per-period counts
    telemetry: Telemetry | None = None

    @property
    def memory_used(self) -> int:
        return sum(self.memory.values())


@dataclass(frozen=True)
class Core:
    index: int
    device: int
    utilization: float | None
    tags: tuple[str, ...]  # runtimes reporting this core
    memory_used: int
    physical: tuple[float, ...] = ()  # utilization of the physical cores behind a logical core (LNC=2)


@dataclass(frozen=True)
class Runtime:
    pid: int | None
    tag: str
    cores: tuple[int, ...]
    vcpu: float | None  # percent of one vCPU (user + system)
    host_memory: int | None
    device_memory: int | None
    executions_per_s: float | None
    errors: int | None  # error_summary total over the period
    latency_p50: float | None  # seconds (total latency)
    latency_p99: float | None
    error: str  # the runtime's own error, or its first group error


@dataclass(frozen=True)
class Screen:
    instance_type: str = ""
    instance_id: str = ""
    device_type: str = ""
    device_count: int = 0
    cores_per_device: int = 0
    lnc: int | None = None
    report_time: float | None = None
    host: Host = field(default_factory=Host)
    devices: tuple[Device, ...] = ()
    cores: tuple[Core, ...] = ()
    runtimes: tuple[Runtime, ...] = ()
    hidden_runtimes: int = 0  # runtimes the tag filter left out
    errors: tuple[str, ...] = ()
    skipped_collections: int | None = None
    has_telemetry: bool = False


def _data(groups: Mapping[str, Group], name: str, cls: type[Any]) -> Any:
    group = groups.get(name)
    return group.data_as(cls) if group is not None else None


def _host(report: Report) -> Host:
    cpu = _data(report.system, N.VCPU_USAGE, VcpuUsage)
    avg = (cpu.average if cpu is not None else None) or {}
    idle = avg.get(N.CPU_IDLE)
    mem_data = _data(report.system, N.MEMORY_INFO, MemoryInfo)
    mem = mem_data.fields if mem_data is not None else {}

    def whole(key: str) -> int | None:
        v = mem.get(key)
        return None if v is None else int(v)

    return Host(
        vcpu_count=(cpu.vcpu_count or 0) if cpu is not None else 0,
        vcpu_busy=None if idle is None else max(0.0, 100.0 - idle),
        vcpu_user=avg.get(N.CPU_USER),
        vcpu_system=avg.get(N.CPU_SYSTEM),
        memory_used=whole(N.MEMORY_USED_BYTES),
        memory_total=whole(N.MEMORY_TOTAL_BYTES),
        swap_used=whole(N.SWAP_USED_BYTES),
        swap_total=whole(N.SWAP_TOTAL_BYTES),
    )


def _core_keys(keys: Any) -> list[int]:
    return [i for i in (index(k) for k in keys) if i is not None]


def _runtime(entry: RuntimeEntry) -> Runtime:
    counters = _data(entry.groups, N.NEURONCORE_COUNTERS, NeuroncoreCounters)
    memory = _data(entry.groups, N.MEMORY_USED, MemoryUsed)
    cores = set(_core_keys(counters.cores if counters is not None else ()))
    cores |= set(_core_keys((memory.per_core or {}) if memory is not None else ()))
    vcpu = _data(entry.groups, N.NEURON_RUNTIME_VCPU_USAGE, RuntimeVcpuUsage)
    usage = (vcpu.usage if vcpu is not None else None) or {}
    stats_group = entry.groups.get(N.EXECUTION_STATS)
    stats = stats_group.data_as(ExecutionStats) if stats_group is not None else None
    period = stats_group.period if stats_group is not None else None
    completed = (stats.execution_summary or {}).get(N.STATUS_COMPLETED) if stats is not None else None
    errors = stats.error_summary if stats is not None else None
    total = stats.latency().get(N.TOTAL_LATENCY, {}) if stats is not None else {}
    error = entry.error
    if not error:
        error = next((f"{name}: {g.error}" for name, g in entry.groups.items() if g.error), "")
    return Runtime(
        pid=entry.pid,
        tag=entry.tag or "?",
        cores=tuple(sorted(cores)),
        vcpu=sum(usage.get(m, 0.0) for m in N.RUNTIME_CPU_MODES) if usage else None,
        host_memory=int(memory.host) if memory is not None and memory.host is not None else None,
        device_memory=int(memory.neuron_device) if memory is not None and memory.neuron_device is not None else None,
        executions_per_s=completed / period if completed is not None and period else None,
        errors=int(sum(errors.values())) if errors is not None else None,
        latency_p50=total.get("p50"),
        latency_p99=total.get("p99"),
        error=error,
    )


def _num(parent: Any, key: str) -> float | None:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _str(parent: Any, key: str) -> str:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    return v if isinstance(v, str) else ""


def _telemetry(report: Report) -> dict[int, Telemetry]:
    """Per-device power and health from the `neuron_device_telemetry` group, read through its spec's typed value."""
    group = report.system.get(TELEMETRY_GROUP)
    value = group.data_as(NeuronDeviceTelemetry) if group is not None else None
    out: dict[int, Telemetry] = {}
    for d in value.devices if value is not None else ():
        if d.index is None:
            continue
        out[d.index] = Telemetry(
            power_status=d.power_status,
            power_avg=d.power.get("avg"),
            power_max=d.power.get("max"),
            unhealthy=tuple(d.unhealthy) if d.healthy is not None else None,
        )
    return out


def _errors(report: Report) -> list[str]:
    out: list[str] = []
    for key, part in (
        (N.NEURON_MONITOR, report.monitor),
        (N.NEURON_HARDWARE_INFO, report.hardware_info),
        (N.INSTANCE_INFO, report.instance_info),
        (N.NEURON_K8S_INFO, report.k8s_info),
    ):
        text = _str(part, N.ERROR)
        if text:
            out.append(f"{key}: {text}")
    if report.problems:
        out.append(f"malformed report: {report.problems.first()}")
    for name, group in report.system.items():
        if group.error:
            out.append(f"{name}: {group.error}")
        problems = group.read()[1]
        if problems:
            out.append(f"{name}: malformed: {problems.first()}")
    for entry in report.runtimes:
        who = f"runtime {entry.tag} (pid {entry.pid_label})"
        if entry.error:
            out.append(f"{who}: {entry.error}")
        for name, group in entry.groups.items():
            if group.error:
                out.append(f"{who} {name}: {group.error}")
            problems = group.read()[1]
            if problems:
                out.append(f"{who} {name}: malformed: {problems.first()}")
    return out


def screen_from_report(raw: Mapping[str, Any], tag_filter: re.Pattern[str] | None = None) -> Screen:
    """Build the screen model of one report; runtimes whose tag does not match ``tag_filter`` are left out."""
    report = read_report(dict(raw))
    hw = report.hardware_info or {}
    entries = [e for e in report.runtimes if tag_filter is None or tag_filter.search(e.tag_written)]
    device_count = index(hw.get(DEVICE_COUNT)) or 0
    per_device = report.cores_per_device

    core_util: dict[int, float] = {}
    core_phys: dict[int, list[float]] = {}
    core_tags: dict[int, list[str]] = {}
    core_mem: dict[int, dict[str, int]] = {}
    for e in entries:
        counters = _data(e.groups, N.NEURONCORE_COUNTERS, NeuroncoreCounters)
        utilization = counters.utilization() if counters is not None else {}
        physical = counters.physical() if counters is not None else {}
        for key in counters.cores if counters is not None else ():
            i = index(key)
            if i is None:
                continue
            core_tags.setdefault(i, []).append(e.tag)
            util = utilization.get(key)
            if util is not None:
                core_util[i] = core_util.get(i, 0.0) + util
            phys = physical.get(key)
            if phys:
                old = core_phys.get(i, [])
                core_phys[i] = [(old[j] if j < len(old) else 0.0) + v for j, v in enumerate(phys.values())]
        memory = _data(e.groups, N.MEMORY_USED, MemoryUsed)
        for key, cats in ((memory.per_core or {}) if memory is not None else {}).items():
            i = index(key)
            if i is None:
                continue
            mem = core_mem.setdefault(i, {})
            for cat, n in cats.items():
                mem[cat] = mem.get(cat, 0) + int(n)
            tags = core_tags.setdefault(i, [])
            if e.tag not in tags:
                tags.append(e.tag)

    seen = set(core_tags) | set(core_util)
    if not per_device and seen:  # old reports without the count: one device holds every core
        per_device = max(seen) + 1
    if not device_count and seen and per_device:
        device_count = max(seen) // per_device + 1
    cores = tuple(
        Core(
            index=i,
            device=i // per_device if per_device else 0,
            utilization=min(100.0, core_util[i]) if i in core_util else (0.0 if core_util else None),
            tags=tuple(core_tags.get(i, ())),
            memory_used=sum(core_mem.get(i, {}).values()),
            physical=tuple(min(100.0, p) for p in core_phys.get(i, ())),
        )
        for i in sorted(set(range(device_count * per_device)) | seen)
    )

    ecc: dict[int, dict[str, int]] = {}
    hw_counters = _data(report.system, N.NEURON_HW_COUNTERS, NeuronHwCounters)
    for d in hw_counters.devices if hw_counters is not None else ():
        if d.index is not None:
            ecc[d.index] = {k: int(v) for k, v in d.events.items()}
    telemetry = _telemetry(report)
    size = _num(hw, DEVICE_MEMORY_SIZE)
    devices = []
    for dev in range(device_count):
        mine = [c for c in cores if c.device == dev]
        memory_by_cat: dict[str, int] = {}
        for c in mine:
            for cat, n in core_mem.get(c.index, {}).items():
                memory_by_cat[cat] = memory_by_cat.get(cat, 0) + n
        utils = [c.utilization for c in mine if c.utilization is not None]
        devices.append(
            Device(
                index=dev,
                utilization=sum(utils) / len(mine) if utils else None,
                cores=tuple(c.index for c in mine),
                memory=memory_by_cat,
                memory_total=int(size) if size else None,
                ecc=ecc.get(dev, {}),
                telemetry=telemetry.get(dev),
            )
        )

    instance = report.instance_info or {}
    lnc = _num(hw, LNC)
    skipped = _num(report.monitor, "skipped_collections")
    return Screen(
        instance_type=_str(instance, "instance_type"),
        instance_id=_str(instance, "instance_id"),
        device_type=_str(hw, DEVICE_TYPE),
        device_count=device_count,
        cores_per_device=per_device,
        lnc=int(lnc) if lnc is not None else None,
        report_time=report.report_time,
        host=_host(report),
        devices=tuple(devices),
        cores=cores,
        runtimes=tuple(_runtime(e) for e in entries),
        hidden_runtimes=len(report.runtimes) - len(entries),
        errors=tuple(_errors(report)),
        skipped_collections=int(skipped) if skipped is not None else None,
        has_telemetry=bool(telemetry),
    )
