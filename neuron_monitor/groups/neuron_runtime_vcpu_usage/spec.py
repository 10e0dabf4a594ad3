"""``neuron_runtime_vcpu_usage`` (runtime): the runtime process's CPU use over the period, percent of one vCPU,
user and system."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.neuron_runtime_vcpu_usage import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import finite
from neuron_monitor.schema.values import Problems, numbers


@dataclass(slots=True)
class RuntimeVcpuUsage:
    usage: dict[str, float] | None  # mode (user, system) -> percent


def read(body: dict[str, Any], where: str, problems: Problems) -> RuntimeVcpuUsage:
    return RuntimeVcpuUsage(numbers(body.get(B.VCPU_USAGE), problems, where, B.VCPU_USAGE))


FAM_USAGE = S.PromFamily(
    "neuron_runtime_vcpu_usage_ratio", S.GAUGE, "Runtime vCPU utilization ratio", S.RUNTIME_SCOPE, ("usage_type",)
)


def gauges(value: RuntimeVcpuUsage) -> Iterator[S.PromSample]:
    usage = value.usage or {}
    yield S.PromSample(
        FAM_USAGE, (), {mode: pct for mode in B.MODES if (pct := usage.get(mode)) is not None}, 100.0, ()
    )


CW_USAGE = S.CwMetric("RuntimeVCpuUsage", S.PERCENT, S.RUNTIME_DIMS, keyed=True)


def datums(value: RuntimeVcpuUsage, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for mode, pct in (value.usage or {}).items():
        yield CW_USAGE, (), mode, pct


TRACK_VCPU = S.Track("vCPU %", "runtime_vcpu", "percent", S.RUNTIME_TRACK, when=S.PERIOD, digits=2, host=True)
COL_VCPU = S.TopColumn(S.TOP_RUNTIMES, "vCPU%", 6, order=10)


def timeline(value: RuntimeVcpuUsage) -> Iterator[S.TimelineSample]:
    """User and system percent, when both are known."""
    usage = value.usage
    if usage is not None:
        user, system = (finite(usage.get(mode)) for mode in B.MODES)
        if user is not None and system is not None:
            yield TRACK_VCPU, (), {B.USER: user, B.SYSTEM: system}


def top(value: RuntimeVcpuUsage, period: float | None) -> Iterator[S.TopCell]:
    """Percent of one vCPU, user + system."""
    usage = value.usage
    yield COL_VCPU, (), f"{sum(usage.get(m, 0.0) for m in B.MODES):.1f}" if usage else "-", ""


SPEC = S.GroupSpec(
    name=N.NEURON_RUNTIME_VCPU_USAGE,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_USAGE,),
    gauges=gauges,
    cloudwatch=(CW_USAGE,),
    datums=datums,
    tracks=(TRACK_VCPU,),
    timeline=timeline,
    timeline_order=20,
    top_columns=(COL_VCPU,),
    top=top,
)
