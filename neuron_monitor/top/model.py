"""The screen model: one neuron-monitor report -> what `neuron-monitor-top` shows, with no terminal involved.

`screen_from_report` reads a report (a parsed JSON object, AWS's format plus our additive keys) and returns a
`Screen`: host, per-device and per-core rows, runtimes and the errors the report carries. It never raises on a
malformed report: a missing or mistyped part reads as absent. A tag filter keeps only matching runtimes, and the
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

MEMORY_CATEGORIES = ("model_code", "tensors", "constants", "model_shared_scratchpad", "runtime_memory")
ECC_KINDS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected")
TELEMETRY_GROUP = "neuron_device_telemetry"


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


def _obj(parent: Any, key: str) -> dict[str, Any]:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    return v if isinstance(v, dict) else {}


def _num(parent: Any, key: str) -> float | None:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _int(parent: Any, key: str) -> int | None:
    v = _num(parent, key)
    return int(v) if v is not None else None


def _str(parent: Any, key: str) -> str:
    v = parent.get(key) if isinstance(parent, Mapping) else None
    return v if isinstance(v, str) else ""


def _core_index(key: str) -> int | None:
    try:
        return int(key)
    except ValueError:
        return None


def _host(system: dict[str, Any]) -> Host:
    cpu = _obj(system, "vcpu_usage")
    avg = _obj(cpu, "average_usage")
    idle = _num(avg, "idle")
    mem = _obj(system, "memory_info")
    return Host(
        vcpu_count=len(_obj(cpu, "usage_data")),
        vcpu_busy=None if idle is None else max(0.0, 100.0 - idle),
        vcpu_user=_num(avg, "user"),
        vcpu_system=_num(avg, "system"),
        memory_used=_int(mem, "memory_used_bytes"),
        memory_total=_int(mem, "memory_total_bytes"),
        swap_used=_int(mem, "swap_used_bytes"),
        swap_total=_int(mem, "swap_total_bytes"),
    )


def _percentile(latency: dict[str, Any], key: str) -> float | None:
    total = _obj(latency, "total_latency")
    return _num(total, key)


def _runtime(entry: dict[str, Any]) -> Runtime:
    rep = _obj(entry, "report")
    pid = _int(entry, "pid")
    tag = _str(entry, "neuron_runtime_tag") or (str(pid) if pid is not None else "?")
    cores = sorted(
        i
        for i in (_core_index(k) for k in _obj(_obj(rep, "neuroncore_counters"), "neuroncores_in_use"))
        if i is not None
    )
    memory = _obj(rep, "memory_used")
    used = _obj(memory, "neuron_runtime_used_bytes")
    for k in _obj(_obj(used, "usage_breakdown"), "neuroncore_memory_usage"):
        i = _core_index(k)
        if i is not None and i not in cores:
            cores.append(i)
    vcpu = _obj(_obj(rep, "neuron_runtime_vcpu_usage"), "vcpu_usage")
    user, system = _num(vcpu, "user"), _num(vcpu, "system")
    stats = _obj(rep, "execution_stats")
    period = _num(stats, "period")
    completed = _num(_obj(stats, "execution_summary"), "completed")
    summary = _obj(stats, "error_summary")
    errors = [v for v in (_num(summary, k) for k in summary) if v is not None]
    error = _str(entry, "error")
    if not error:
        for name, group in rep.items():
            text = _str(group, "error")
            if text:
                error = f"{name}: {text}"
                break
    return Runtime(
        pid=pid,
        tag=tag,
        cores=tuple(sorted(cores)),
        vcpu=None if user is None and system is None else (user or 0.0) + (system or 0.0),
        host_memory=_int(used, "host"),
        device_memory=_int(used, "neuron_device"),
        executions_per_s=completed / period if completed is not None and period else None,
        errors=int(sum(errors)) if stats and summary else None,
        latency_p50=_percentile(_obj(stats, "latency_stats"), "p50"),
        latency_p99=_percentile(_obj(stats, "latency_stats"), "p99"),
        error=error,
    )


def _telemetry(system: dict[str, Any]) -> dict[int, Telemetry]:
    """Per-device telemetry from the `neuron_device_telemetry` group, read leniently until its schema is fixed."""
    group = _obj(system, TELEMETRY_GROUP)
    devices = group.get("neuron_devices")
    out: dict[int, Telemetry] = {}
    if not isinstance(devices, list):
        return out
    for d in devices:
        index = _int(d, "neuron_device_index")
        if index is None:
            continue
        power = _obj(d, "power")
        health = _obj(d, "health") or d
        components = health.get("unhealthy_components")
        unhealthy = tuple(str(c) for c in components) if isinstance(components, list) else None
        out[index] = Telemetry(
            power_status=_str(power, "status") or None,
            power_avg=_num(power, "avg_percent") if "avg_percent" in power else _num(power, "avg"),
            power_max=_num(power, "max_percent") if "max_percent" in power else _num(power, "max"),
            unhealthy=unhealthy,
        )
    return out


def _errors(report: dict[str, Any], runtimes: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for key in ("neuron_monitor", "neuron_hardware_info", "instance_info", "neuron_k8s_info"):
        text = _str(_obj(report, key), "error")
        if text:
            out.append(f"{key}: {text}")
    for name, group in _obj(report, "system_data").items():
        text = _str(group, "error")
        if text:
            out.append(f"{name}: {text}")
    for entry in runtimes:
        who = f"runtime {_str(entry, 'neuron_runtime_tag') or '?'} (pid {_int(entry, 'pid')})"
        text = _str(entry, "error")
        if text:
            out.append(f"{who}: {text}")
        for name, group in _obj(entry, "report").items():
            text = _str(group, "error")
            if text:
                out.append(f"{who} {name}: {text}")
    return out


def _tag_matches(tag_filter: re.Pattern[str] | None, entry: dict[str, Any]) -> bool:
    return tag_filter is None or bool(tag_filter.search(_str(entry, "neuron_runtime_tag")))


def screen_from_report(report: Mapping[str, Any], tag_filter: re.Pattern[str] | None = None) -> Screen:
    """Build the screen model of one report; runtimes whose tag does not match ``tag_filter`` are left out."""
    report = dict(report)
    hw = _obj(report, "neuron_hardware_info")
    system = _obj(report, "system_data")
    all_entries = [e for e in report.get("neuron_runtime_data") or [] if isinstance(e, dict)]
    entries = [e for e in all_entries if _tag_matches(tag_filter, e)]
    device_count = _int(hw, "neuron_device_count") or 0
    per_device = _int(hw, "neuroncore_per_device_count") or 0

    core_util: dict[int, float] = {}
    core_phys: dict[int, list[float]] = {}
    core_tags: dict[int, list[str]] = {}
    core_mem: dict[int, dict[str, int]] = {}
    for e in entries:
        tag = _str(e, "neuron_runtime_tag") or str(_int(e, "pid"))
        rep = _obj(e, "report")
        for k, c in _obj(_obj(rep, "neuroncore_counters"), "neuroncores_in_use").items():
            i = _core_index(k)
            if i is None:
                continue
            core_tags.setdefault(i, []).append(tag)
            u = _num(c, "neuroncore_utilization")
            if u is not None:
                core_util[i] = core_util.get(i, 0.0) + u
            for sub in c.values():  # LNC=2: {"v3d": {"nc_v3.0": {...}, "nc_v3.1": {...}}}
                if isinstance(sub, dict):
                    phys = [_num(p, "neuroncore_utilization") for p in sub.values()]
                    old = core_phys.get(i, [])
                    core_phys[i] = [
                        (old[j] if j < len(old) else 0.0) + (v or 0.0) for j, v in enumerate(phys) if v is not None
                    ]
        used = _obj(_obj(rep, "memory_used"), "neuron_runtime_used_bytes")
        for k, cats in _obj(_obj(used, "usage_breakdown"), "neuroncore_memory_usage").items():
            i = _core_index(k)
            if i is None:
                continue
            mem = core_mem.setdefault(i, {})
            for cat in cats if isinstance(cats, dict) else ():
                n = _int(cats, cat)
                if n is not None:
                    mem[cat] = mem.get(cat, 0) + n
            core_tags.setdefault(i, [])
            if tag not in core_tags[i]:
                core_tags[i].append(tag)

    seen = set(core_tags) | set(core_util)
    if not per_device and seen:  # old reports without the count: one device holds every core
        per_device = max(seen) + 1
    if not device_count and seen and per_device:
        device_count = max(seen) // per_device + 1
    total_cores = device_count * per_device
    cores = tuple(
        Core(
            index=i,
            device=i // per_device if per_device else 0,
            utilization=min(100.0, core_util[i]) if i in core_util else (0.0 if core_util else None),
            tags=tuple(core_tags.get(i, ())),
            memory_used=sum(core_mem.get(i, {}).values()),
            physical=tuple(min(100.0, p) for p in core_phys.get(i, ())),
        )
        for i in sorted(set(range(total_cores)) | seen)
    )

    ecc: dict[int, dict[str, int]] = {}
    hw_devices = _obj(system, "neuron_hw_counters").get("neuron_devices")
    for d in hw_devices if isinstance(hw_devices, list) else ():
        index = _int(d, "neuron_device_index")
        if index is not None:
            ecc[index] = {k: _int(d, k) or 0 for k in ECC_KINDS if k in d}
    telemetry = _telemetry(system)
    memory_size = _int(hw, "neuron_device_memory_size")
    devices = []
    for dev in range(device_count):
        mine = [c for c in cores if c.device == dev]
        memory: dict[str, int] = {}
        for c in mine:
            for cat, n in core_mem.get(c.index, {}).items():
                memory[cat] = memory.get(cat, 0) + n
        utils = [c.utilization for c in mine if c.utilization is not None]
        devices.append(
            Device(
                index=dev,
                utilization=sum(utils) / len(mine) if utils else None,
                cores=tuple(c.index for c in mine),
                memory=memory,
                memory_total=memory_size,
                ecc=ecc.get(dev, {}),
                telemetry=telemetry.get(dev),
            )
        )

    instance = _obj(report, "instance_info")
    daemon = _obj(report, "neuron_monitor")
    return Screen(
        instance_type=_str(instance, "instance_type"),
        instance_id=_str(instance, "instance_id"),
        device_type=_str(hw, "neuron_device_type"),
        device_count=device_count,
        cores_per_device=per_device,
        lnc=_int(hw, "logical_neuroncore_config"),
        report_time=_num(report, "report_time"),
        host=_host(system),
        devices=tuple(devices),
        cores=cores,
        runtimes=tuple(_runtime(e) for e in entries),
        hidden_runtimes=len(all_entries) - len(entries),
        errors=tuple(_errors(report, all_entries)),
        skipped_collections=_int(daemon, "skipped_collections"),
        has_telemetry=bool(telemetry),
    )
