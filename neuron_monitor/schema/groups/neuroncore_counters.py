"""``neuroncore_counters`` (runtime): per logical NeuronCore utilization (percent), FLOPS, and the per-physical-core
utilization breakdown of a logical core (``v3d`` on trn2, ``v4d`` on trn3, any ``v<N>d`` later)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.read import Problems, mapping, number


@dataclass(slots=True)
class CoreCounters:
    utilization: float | None  # percent
    flops: float | None  # per second, over the period
    effective_flops: float | None
    physical: dict[str, float] | None  # physical core name ("nc_v3.0") -> utilization percent; None if no breakdown


@dataclass(slots=True)
class NeuroncoreCounters:
    cores: dict[str, CoreCounters]  # by the logical core index as written ("0", "1", ...)


def _physical(breakdown: dict[str, Any], problems: Problems, where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pdata in breakdown.items():
        pdata = mapping(pdata, problems, where, name)
        if pdata is not None:
            value = number(pdata.get(N.NEURONCORE_UTILIZATION), problems, f"{where}.{name}", N.NEURONCORE_UTILIZATION)
            if value is not None:
                out[name] = value
    return out


def read(body: dict[str, Any], where: str, problems: Problems) -> NeuroncoreCounters:
    cores: dict[str, CoreCounters] = {}
    in_use = mapping(body.get(N.NEURONCORES_IN_USE), problems, where, N.NEURONCORES_IN_USE) or {}
    cwhere = f"{where}.{N.NEURONCORES_IN_USE}"
    for core, data in in_use.items():
        if data.__class__ is not dict:
            data = mapping(data, problems, cwhere, core, counted=True)
            if data is None:
                continue
        util = flops = effective = None
        physical = None
        for key, value in data.items():
            cls = value.__class__
            if key == N.NEURONCORE_UTILIZATION:
                util = value if cls is float else number(value, problems, f"{cwhere}.{core}", key)
            elif key == N.FLOPS:
                flops = float(value) if cls is int else number(value, problems, f"{cwhere}.{core}", key, True)
            elif key == N.EFFECTIVE_FLOPS:
                effective = float(value) if cls is int else number(value, problems, f"{cwhere}.{core}", key, True)
            elif cls is dict:  # the physical breakdown, whatever the core version names it
                physical = _physical(value, problems, f"{cwhere}.{core}.{key}")
        cores[core] = CoreCounters(util, flops, effective, physical)
    return NeuroncoreCounters(cores)


FAM_UTIL = S.PromFamily("neuroncore_utilization_ratio", S.GAUGE, "NeuronCore utilization ratio", S.CORE_SCOPE)
FAM_PHYSICAL = S.PromFamily(
    "neuroncore_physical_utilization_ratio",
    S.GAUGE,
    "Utilization ratio of each physical NeuronCore of a logical NeuronCore",
    S.CORE_SCOPE,
    ("physical_neuroncore",),
)
FAM_FLOPS = S.PromFamily(
    "neuroncore_floating_point_operations",
    S.COUNTER,
    "Floating point operations executed by the NeuronCore",
    S.CORE_SCOPE,
)
FAM_EFFECTIVE_FLOPS = S.PromFamily(
    "neuroncore_effective_floating_point_operations",
    S.COUNTER,
    "Effective floating point operations of the NeuronCore",
    S.CORE_SCOPE,
)


def gauges(value: NeuroncoreCounters) -> Iterator[S.PromSample]:
    for core, c in value.cores.items():
        if c.utilization is not None:
            yield FAM_UTIL, (core,), c.utilization / 100.0
        if c.physical:
            for name, pvalue in c.physical.items():
                yield FAM_PHYSICAL, (core, name), pvalue / 100.0


def counts(value: NeuroncoreCounters, period: float) -> Iterator[S.PromSample]:
    """FLOPs over the period: the rate x the period."""
    for core, c in value.cores.items():
        if c.flops is not None:
            yield FAM_FLOPS, (core,), c.flops * period
        if c.effective_flops is not None:
            yield FAM_EFFECTIVE_FLOPS, (core,), c.effective_flops * period


CW_UTIL = S.CwMetric("NeuronCoreUtilization", S.PERCENT, S.CORE_DIMS)
CW_FLOPS = S.CwMetric("NeuronCoreFlops", S.COUNT_PER_SECOND, S.CORE_DIMS)
CW_EFFECTIVE_FLOPS = S.CwMetric("NeuronCoreEffectiveFlops", S.COUNT_PER_SECOND, S.CORE_DIMS)
CW_PHYSICAL = S.CwMetric("PhysicalNeuronCoreUtilization", S.PERCENT, S.PHYSICAL_CORE_DIMS)


def datums(value: NeuroncoreCounters, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for core, c in value.cores.items():
        key = (core,)
        if c.utilization is not None:
            yield CW_UTIL, key, "", c.utilization
        if c.flops is not None:
            yield CW_FLOPS, key, "", c.flops
        if c.effective_flops is not None:
            yield CW_EFFECTIVE_FLOPS, key, "", c.effective_flops
        if c.physical:
            for name, pvalue in c.physical.items():
                yield CW_PHYSICAL, (core, name), "", pvalue


SPEC = S.GroupSpec(
    name=N.NEURONCORE_COUNTERS,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_UTIL, FAM_PHYSICAL, FAM_FLOPS, FAM_EFFECTIVE_FLOPS),
    gauges=gauges,
    counts=counts,
    cloudwatch=(CW_UTIL, CW_FLOPS, CW_EFFECTIVE_FLOPS, CW_PHYSICAL),
    datums=datums,
    tracks=(
        S.Track("utilization", "neuroncore_utilization", "percent", S.CORE_TRACK),
        S.Track("physical utilization", "neuroncore_physical_utilization", "percent", S.CORE_TRACK),
        S.Track("flops", "flops", "flops", S.CORE_TRACK),
    ),
)
