"""Report -> CloudWatch datums: every metric group with its unit and dimensions.

Reads one parsed neuron-monitor report (dict); returns a list of single-sample ``Datum``s stamped with the report's
``report_time`` (or the wall clock when the daemon did not write one). One function per group shapes its body.

Rules:
* a group object is sent only when it is ``fresh`` (collected for this report; absent = fresh, as AWS's daemon
  writes no ``fresh``) and its ``error`` is empty, so every observation reaches CloudWatch once and the per-period
  counters (execution_stats, neuron_hw_counters, vcpu context switches) are counted exactly once;
* a runtime entry whose ``error`` is set is skipped, as AWS's exporters do;
* values that are not numbers (null latency when idle, strings) are skipped;
* latency percentiles are sent as one metric per percentile (``ExecutionLatencyP99`` ...): exact as reported,
  alarmable directly. Statistic sets cannot carry them (CloudWatch derives percentiles from a statistic set only
  when min = max), and rebuilding a distribution from seven quantiles would only approximate them;
* two datums of one series in one report (two runtimes with the same tag, or several runtimes on one core in
  the container-insights preset) are summed for additive metrics and kept as two samples for latencies.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_monitor.exporters.cloudwatch.datum import (
    BYTES,
    COUNT,
    COUNT_PER_SECOND,
    PERCENT,
    SECONDS,
    Datum,
    Dims,
)
from neuron_monitor.exporters.cloudwatch.dimensions import DimensionScheme, K8sOwner, k8s_owners
from neuron_monitor.report import group_data_usable


def camel(key: str) -> str:
    """``completed_with_err`` -> ``CompletedWithErr``, ``nc_v3.0`` -> ``NcV30``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", key) if part)


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


@dataclass(frozen=True)
class MapOptions:
    high_resolution: bool = False
    per_vcpu: bool = False  # one series per vCPU and usage type (192 vCPUs x 8 on a trn2.48xlarge): off by default


class _Emitter:
    """Collects the datums of one report, merging repeated series (sum, or a second sample for latencies)."""

    def __init__(self, timestamp: float, resolution: int) -> None:
        self.timestamp = timestamp
        self.resolution = resolution
        self._by_key: dict[tuple[str, Dims], Datum] = {}
        self._extra: list[Datum] = []

    def __call__(self, name: str, unit: str, dims: Dims, raw: object, additive: bool = True) -> None:
        value = _num(raw)
        if value is None:
            return
        key = (name, dims)
        seen = self._by_key.get(key)
        if seen is None:
            self._by_key[key] = Datum(name, unit, dims, self.timestamp, value, resolution=self.resolution)
        elif additive:
            seen.value += value
        else:
            self._extra.append(Datum(name, unit, dims, self.timestamp, value, resolution=self.resolution))

    def datums(self) -> list[Datum]:
        return [*self._by_key.values(), *self._extra]


@dataclass
class _Ctx:
    emit: _Emitter
    scheme: DimensionScheme
    options: MapOptions
    host: Dims
    cores_per_device: int
    core_owner: dict[str, K8sOwner]
    device_owner: dict[str, K8sOwner]

    def device_of(self, core: str) -> int | None:
        if self.cores_per_device > 0 and core.isdigit():
            return int(core) // self.cores_per_device
        return None


# ---- runtime groups -------------------------------------------------------------------------------------------


def _neuroncore_counters(ctx: _Ctx, tag: str, body: dict[str, Any]) -> None:
    cores = body.get("neuroncores_in_use")
    if not isinstance(cores, dict):
        return
    for core, data in cores.items():
        if not isinstance(data, dict):
            continue
        core = str(core)
        dims = ctx.scheme.core(ctx.host, tag, ctx.device_of(core), core, ctx.core_owner.get(core))
        ctx.emit("NeuronCoreUtilization", PERCENT, dims, data.get("neuroncore_utilization"))
        ctx.emit("NeuronCoreFlops", COUNT_PER_SECOND, dims, data.get("flops"))
        ctx.emit("NeuronCoreEffectiveFlops", COUNT_PER_SECOND, dims, data.get("effective_flops"))
        v3d = data.get("v3d")
        if isinstance(v3d, dict):
            for phys, pdata in v3d.items():
                if isinstance(pdata, dict):
                    pdims = (*dims, ("PhysicalNeuronCore", str(phys)))
                    ctx.emit("PhysicalNeuronCoreUtilization", PERCENT, pdims, pdata.get("neuroncore_utilization"))


def _execution_stats(ctx: _Ctx, tag: str, body: dict[str, Any]) -> None:
    dims = ctx.scheme.runtime(ctx.host, tag)
    summary = body.get("execution_summary")
    if isinstance(summary, dict):
        for k, v in summary.items():
            ctx.emit("Execution" + camel(k), COUNT, dims, v)
        period = _num(body.get("period"))
        completed = _num(summary.get("completed"))
        if period and period > 0 and completed is not None:
            ctx.emit("ExecutionCompletedPerSecond", COUNT_PER_SECOND, dims, completed / period)
    errors = body.get("error_summary")
    if isinstance(errors, dict):
        values = [n for n in (_num(v) for v in errors.values()) if n is not None]
        for k, v in errors.items():
            ctx.emit("ExecutionErrors" + camel(k), COUNT, dims, v)
        if values:
            ctx.emit("ExecutionErrorsTotal", COUNT, dims, sum(values))
    latency = body.get("latency_stats")
    if isinstance(latency, dict):
        for key, prefix in (("total_latency", "ExecutionLatency"), ("device_latency", "DeviceLatency")):
            pct = latency.get(key)
            if isinstance(pct, dict):
                for p, v in pct.items():
                    ctx.emit(prefix + camel(p), SECONDS, dims, v, additive=False)


def _memory_used(ctx: _Ctx, tag: str, body: dict[str, Any]) -> None:
    used = body.get("neuron_runtime_used_bytes")
    if not isinstance(used, dict):
        return
    dims = ctx.scheme.runtime(ctx.host, tag)
    ctx.emit("RuntimeHostMemoryUsed", BYTES, dims, used.get("host"))
    ctx.emit("RuntimeDeviceMemoryUsed", BYTES, dims, used.get("neuron_device"))
    breakdown = used.get("usage_breakdown")
    if not isinstance(breakdown, dict):
        return
    host = breakdown.get("host")
    if isinstance(host, dict):
        for k, v in host.items():
            ctx.emit("RuntimeHostMemory" + camel(k), BYTES, dims, v)
    per_core = breakdown.get("neuroncore_memory_usage")
    if isinstance(per_core, dict):
        for core, usage in per_core.items():
            if not isinstance(usage, dict):
                continue
            core = str(core)
            cdims = ctx.scheme.core(ctx.host, tag, ctx.device_of(core), core, ctx.core_owner.get(core))
            total = 0.0
            for k, v in usage.items():
                n = _num(v)
                if n is not None:
                    total += n
                    ctx.emit("NeuronCoreMemoryUsage" + camel(k), BYTES, cdims, n)
            ctx.emit("NeuronCoreMemoryUsageTotal", BYTES, cdims, total)


def _neuron_runtime_vcpu_usage(ctx: _Ctx, tag: str, body: dict[str, Any]) -> None:
    usage = body.get("vcpu_usage")
    if isinstance(usage, dict):
        dims = ctx.scheme.runtime(ctx.host, tag)
        for k, v in usage.items():
            ctx.emit("RuntimeVCpuUsage" + camel(k), PERCENT, dims, v)


RUNTIME_GROUPS: dict[str, Callable[[_Ctx, str, dict[str, Any]], None]] = {
    "neuroncore_counters": _neuroncore_counters,
    "execution_stats": _execution_stats,
    "memory_used": _memory_used,
    "neuron_runtime_vcpu_usage": _neuron_runtime_vcpu_usage,
}

# ---- system groups --------------------------------------------------------------------------------------------


def _vcpu_usage(ctx: _Ctx, body: dict[str, Any]) -> None:
    def usage(dims: Dims, data: dict[str, Any]) -> None:
        for k, v in data.items():
            ctx.emit("HostVCpuUsage" + camel(k), PERCENT, dims, v)
        idle = _num(data.get("idle"))
        if idle is not None:
            ctx.emit("HostVCpuUtilization", PERCENT, dims, min(100.0, max(0.0, 100.0 - idle)))

    avg = body.get("average_usage")
    if isinstance(avg, dict):
        usage(ctx.host, avg)
    per_cpu = body.get("usage_data")
    if isinstance(per_cpu, dict):
        ctx.emit("HostVCpuCount", COUNT, ctx.host, len(per_cpu))
        if ctx.options.per_vcpu:
            for cpu, data in per_cpu.items():
                if isinstance(data, dict):
                    usage(ctx.scheme.vcpu(ctx.host, str(cpu)), data)
    ctx.emit("HostContextSwitches", COUNT, ctx.host, body.get("context_switch_count"))


def _memory_info(ctx: _Ctx, body: dict[str, Any]) -> None:
    for k, v in body.items():
        if k.endswith("_bytes"):
            ctx.emit("Host" + camel(k[: -len("_bytes")]), BYTES, ctx.host, v)
    total, used = _num(body.get("memory_total_bytes")), _num(body.get("memory_used_bytes"))
    if total and used is not None and total > 0:
        ctx.emit("HostMemoryUtilization", PERCENT, ctx.host, 100.0 * used / total)


def _neuron_hw_counters(ctx: _Ctx, body: dict[str, Any]) -> None:
    devices = body.get("neuron_devices")
    if not isinstance(devices, list):
        return
    for dev in devices:
        if not isinstance(dev, dict) or _num(dev.get("neuron_device_index")) is None:
            continue
        index = str(int(dev["neuron_device_index"]))
        dims = ctx.scheme.device(ctx.host, index, ctx.device_owner.get(index))
        total = 0.0
        for k, v in dev.items():
            n = _num(v)
            if k != "neuron_device_index" and n is not None:
                total += n
                ctx.emit("NeuronDevice" + camel(k), COUNT, dims, n)
        ctx.emit("NeuronDeviceHwEccEventsTotal", COUNT, dims, total)


SYSTEM_GROUPS: dict[str, Callable[[_Ctx, dict[str, Any]], None]] = {
    "vcpu_usage": _vcpu_usage,
    "memory_info": _memory_info,
    "neuron_hw_counters": _neuron_hw_counters,
}


def _sendable(name: str, group: object) -> bool:
    return isinstance(group, dict) and group.get("fresh", True) is not False and group_data_usable(name, group)


class ReportMapper:
    """Turns reports into datums for one dimension scheme and option set."""

    def __init__(self, scheme: DimensionScheme | None = None, options: MapOptions | None = None) -> None:
        self.scheme = scheme or DimensionScheme()
        self.options = options or MapOptions()

    def map(self, report: dict[str, Any], now: float | None = None) -> list[Datum]:
        stamp = _num(report.get("report_time"))
        timestamp = stamp if stamp is not None else (time.time() if now is None else now)
        emit = _Emitter(timestamp, 1 if self.options.high_resolution else 60)
        instance = report.get("instance_info")
        hardware = report.get("neuron_hardware_info")
        per_device = _num(hardware.get("neuroncore_per_device_count")) if isinstance(hardware, dict) else None
        core_owner, device_owner = k8s_owners(report)
        ctx = _Ctx(
            emit,
            self.scheme,
            self.options,
            self.scheme.host(instance if isinstance(instance, dict) else {}),
            int(per_device or 0),
            core_owner,
            device_owner,
        )
        for entry in report.get("neuron_runtime_data") or ():
            if not isinstance(entry, dict) or entry.get("error"):
                continue
            groups = entry.get("report")
            if not isinstance(groups, dict):
                continue
            tag = str(entry.get("neuron_runtime_tag") or entry.get("pid") or "")
            for name, body in groups.items():
                shape = RUNTIME_GROUPS.get(name)
                if shape is not None and _sendable(name, body):
                    shape(ctx, tag, body)
        system = report.get("system_data")
        if isinstance(system, dict):
            for name, body in system.items():
                shape_sys = SYSTEM_GROUPS.get(name)
                if shape_sys is not None and _sendable(name, body):
                    shape_sys(ctx, body)
        return emit.datums()
