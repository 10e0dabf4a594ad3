"""``vcpu_usage`` (system): the host's CPU use over the period by mode, averaged over the vCPUs and per vCPU
(percent), and the context switches of the period (a per-period count)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.vcpu_usage import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import finite
from neuron_monitor.schema.values import Problems, mapping, number, numbers


@dataclass(slots=True)
class VcpuUsage:
    average: dict[str, float] | None  # mode -> percent, over all vCPUs
    vcpu_count: int | None  # entries of ``usage_data`` (None when absent)
    context_switches: float | None  # over the period
    _per_vcpu: dict[str, Any] | None  # ``usage_data`` as written, read on demand (192 x 7 values on a trn2)

    def per_vcpu(self) -> dict[str, dict[str, float]]:
        """vCPU -> mode -> percent (entries that are not objects, and values that are not numbers, left out)."""
        out: dict[str, dict[str, float]] = {}
        for cpu, data in (self._per_vcpu or {}).items():
            if isinstance(data, dict):
                values = numbers(data, Problems(), "usage_data", cpu)
                if values is not None:
                    out[cpu] = values
        return out


def read(body: dict[str, Any], where: str, problems: Problems) -> VcpuUsage:
    per_vcpu = mapping(body.get(B.USAGE_DATA), problems, where, B.USAGE_DATA, counted=True)
    return VcpuUsage(
        average=numbers(body.get(B.AVERAGE_USAGE), problems, where, B.AVERAGE_USAGE, counted=True),
        vcpu_count=len(per_vcpu) if per_vcpu is not None else None,
        context_switches=number(body.get(B.CONTEXT_SWITCH_COUNT), problems, where, B.CONTEXT_SWITCH_COUNT, True),
        _per_vcpu=per_vcpu,
    )


FAM_COUNT = S.PromFamily("system_vcpu_count", S.GAUGE, "System vCPU count", S.INSTANCE_SCOPE)
FAM_USAGE = S.PromFamily(
    "system_vcpu_usage_ratio", S.GAUGE, "System CPU utilization ratio", S.INSTANCE_SCOPE, ("usage_type",)
)
FAM_CPU_SECONDS = S.PromFamily(
    "system_cpu_seconds",
    S.COUNTER,
    "Seconds all vCPUs spent in each mode",
    S.INSTANCE_SCOPE,
    ("mode",),
    limit=S.MAX_PERCENT,
)
FAM_CONTEXT_SWITCHES = S.PromFamily(
    "system_context_switches", S.COUNTER, "Context switches on all vCPUs", S.INSTANCE_SCOPE
)


def gauges(value: VcpuUsage) -> Iterator[S.PromSample]:
    """As AWS's exporter: nice folds into user, io_wait/irq/soft_irq into system, each capped at 100 %."""
    if value.vcpu_count is not None:
        yield S.PromSample(FAM_COUNT, (), {"": float(value.vcpu_count)}, 1.0, ())
    average = value.average
    if average is not None:
        pct = {mode: average.get(mode) or 0.0 for mode in B.CPU_MODES}
        system = pct[B.CPU_SYSTEM] + pct[B.CPU_IO_WAIT] + pct[B.CPU_IRQ] + pct[B.CPU_SOFT_IRQ]
        shares = {B.CPU_USER: min(pct[B.CPU_USER] + pct[B.CPU_NICE], 100.0), B.CPU_SYSTEM: min(system, 100.0)}
        yield S.PromSample(FAM_USAGE, (), shares, 100.0, ())


def counts(value: VcpuUsage, period: float) -> Iterator[S.PromCount]:
    """CPU seconds by mode (percent / 100 x period x vCPUs) and the context switches."""
    if value.vcpu_count and value.average is not None:
        average = value.average
        yield S.PromCount(
            FAM_CPU_SECONDS,
            (),
            {mode: average.get(mode) or 0.0 for mode in B.CPU_MODES},
            period * value.vcpu_count / 100.0,
        )
    if value.context_switches is not None:
        yield S.PromCount(FAM_CONTEXT_SWITCHES, (), {"": value.context_switches}, 1.0)


CW_USAGE = S.CwMetric("HostVCpuUsage", S.PERCENT, S.HOST_DIMS, keyed=True)
CW_UTILIZATION = S.CwMetric("HostVCpuUtilization", S.PERCENT, S.HOST_DIMS)
CW_COUNT = S.CwMetric("HostVCpuCount", S.COUNT, S.HOST_DIMS)
CW_VCPU_USAGE = S.CwMetric("HostVCpuUsage", S.PERCENT, S.VCPU_DIMS, keyed=True)
CW_VCPU_UTILIZATION = S.CwMetric("HostVCpuUtilization", S.PERCENT, S.VCPU_DIMS)
CW_CONTEXT_SWITCHES = S.CwMetric("HostContextSwitches", S.COUNT, S.HOST_DIMS)


def busy_percent(shares: dict[str, float]) -> float | None:
    """100 % minus idle, or None when the shares do not say: no idle share, or every share 0 (no tick passed
    between the two samples, as in a frozen copy of /proc/stat such as a replayed capture: 0 % idle there is not
    100 % busy)."""
    idle = shares.get(B.CPU_IDLE)
    if idle is None or not any(shares.values()):
        return None
    return min(100.0, max(0.0, 100.0 - idle))


def _usage(data: dict[str, float], key: tuple[str, ...], usage: S.CwMetric, util: S.CwMetric) -> Iterator[S.CwDatum]:
    for mode, pct in data.items():
        yield usage, key, mode, pct
    busy = busy_percent(data)
    if busy is not None:
        yield util, key, "", busy


def datums(value: VcpuUsage, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    if value.average is not None:
        yield from _usage(value.average, (), CW_USAGE, CW_UTILIZATION)
    if value.vcpu_count is not None:
        yield CW_COUNT, (), "", float(value.vcpu_count)
        if per_vcpu:
            for cpu, data in value.per_vcpu().items():
                yield from _usage(data, (cpu,), CW_VCPU_USAGE, CW_VCPU_UTILIZATION)
    if value.context_switches is not None:
        yield CW_CONTEXT_SWITCHES, (), "", value.context_switches


TRACK_VCPU = S.Track("host vCPU %", "host_vcpu", "percent", S.HOST_TRACK, when=S.PERIOD, digits=2, host=True)


def timeline(value: VcpuUsage) -> Iterator[S.TimelineSample]:
    """The average usage by mode (idle left out)."""
    if value.average is None:
        return
    average = {k: v for k in B.CPU_MODES if (v := finite(value.average.get(k))) is not None}
    if average:
        yield TRACK_VCPU, (), {k: v for k, v in average.items() if k != B.CPU_IDLE}


# neuron-monitor-top: the host line's CPU bar (busy share of all vCPUs: 100 % minus idle)
BAR_CPU = S.TopColumn(S.TOP_HOST, "host CPU", 0, order=10, always=True, missing="    -  ", history="host CPU")


def top_bars(value: VcpuUsage) -> Iterator[S.TopBar]:
    busy = busy_percent(value.average or {})
    label = f"host CPU ({value.vcpu_count} vCPU)" if value.vcpu_count else "host CPU"
    yield BAR_CPU, label, busy, "    -  " if busy is None else f" {busy:5.1f}%"


SPEC = S.GroupSpec(
    name=N.VCPU_USAGE,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_COUNT, FAM_USAGE, FAM_CPU_SECONDS, FAM_CONTEXT_SWITCHES),
    gauges=gauges,
    counts=counts,
    counts_use_period=True,
    uncounted=(((B.USAGE_DATA,), False), ((), True)),  # the values, not the keys: their number is the vCPU count
    cloudwatch=(CW_USAGE, CW_UTILIZATION, CW_COUNT, CW_VCPU_USAGE, CW_VCPU_UTILIZATION, CW_CONTEXT_SWITCHES),
    datums=datums,
    tracks=(TRACK_VCPU,),
    timeline=timeline,
    timeline_order=10,
    top_columns=(BAR_CPU,),
    top_bars=top_bars,
)
