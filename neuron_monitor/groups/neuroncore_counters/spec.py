"""``neuroncore_counters`` (runtime): per logical NeuronCore utilization (percent), FLOPS, and the per-physical-core
utilization breakdown of a logical core (``v3d`` on trn2, ``v4d`` on trn3, any ``v<N>d`` later)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.neuroncore_counters import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems, index, mapping, number


@dataclass(slots=True)
class NeuroncoreCounters:
    """Per logical NeuronCore (by its index as written: "0", "1", ...). The FLOP rates (counted) are read at once;
    the utilization and the physical breakdowns on first use (the counting pass needs neither)."""

    cores: list[str]  # the cores in use, in report order
    flops: dict[str, float]  # FLOP/s over the period
    effective_flops: dict[str, float]
    _in_use: dict[str, Any]
    _where: str
    _problems: Problems
    _utilization: dict[str, float] | None = None
    _breakdowns: dict[str, tuple[str, dict[str, Any]]] | None = None
    _physical: dict[str, dict[str, float]] | None = None

    def utilization(self) -> dict[str, float]:
        """Core -> utilization percent. Read once; its wrong-typed values are added to the group's problems then."""
        if self._utilization is None:
            util: dict[str, float] = {}
            breakdowns: dict[str, tuple[str, dict[str, Any]]] = {}
            cwhere = f"{self._where}.{B.NEURONCORES_IN_USE}"
            for core in self.cores:
                data = self._in_use[core]
                value = data.get(B.NEURONCORE_UTILIZATION)
                if value.__class__ is float or value.__class__ is int:
                    util[core] = value
                elif value is not None:
                    checked = number(value, self._problems, f"{cwhere}.{core}", B.NEURONCORE_UTILIZATION)
                    if checked is not None:
                        util[core] = checked
                for key, part in data.items():
                    if part.__class__ is dict:  # the physical breakdown, whatever the core version names it
                        breakdowns[core] = (key, part)
            self._utilization, self._breakdowns = util, breakdowns
        return self._utilization

    def physical(self) -> dict[str, dict[str, float]]:
        """Logical core -> physical core name ("nc_v3.0", "nc_v4.1") -> utilization percent, for the cores that
        carry a breakdown. Read once; its wrong-typed values are added to the group's problems then."""
        if self._physical is None:
            self.utilization()
            where = f"{self._where}.{B.NEURONCORES_IN_USE}"
            self._physical = {
                core: _physical(breakdown, self._problems, f"{where}.{core}.{key}")
                for core, (key, breakdown) in (self._breakdowns or {}).items()
            }
        return self._physical


def _physical(breakdown: dict[str, Any], problems: Problems, where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pdata in breakdown.items():
        pdata = mapping(pdata, problems, where, name)
        if pdata is not None:
            value = number(pdata.get(B.NEURONCORE_UTILIZATION), problems, f"{where}.{name}", B.NEURONCORE_UTILIZATION)
            if value is not None:
                out[name] = value
    return out


def _rate(value: Any, store: dict[str, float], core: str, problems: Problems, where: str, key: str) -> None:
    checked = number(value, problems, f"{where}.{core}", key, counted=True)
    if checked is not None:
        store[core] = checked


def read(body: dict[str, Any], where: str, problems: Problems) -> NeuroncoreCounters:
    cores: list[str] = []
    flops: dict[str, float] = {}
    effective: dict[str, float] = {}
    in_use = mapping(body.get(B.NEURONCORES_IN_USE), problems, where, B.NEURONCORES_IN_USE) or {}
    for core, data in in_use.items():
        if (
            data.__class__ is not dict
            and mapping(data, problems, f"{where}.{B.NEURONCORES_IN_USE}", core, True) is None
        ):
            continue
        cores.append(core)
        value = data.get(B.FLOPS)
        if value is not None:
            if value.__class__ is int or value.__class__ is float:
                flops[core] = value
            else:
                _rate(value, flops, core, problems, f"{where}.{B.NEURONCORES_IN_USE}", B.FLOPS)
        value = data.get(B.EFFECTIVE_FLOPS)
        if value is not None:
            if value.__class__ is int or value.__class__ is float:
                effective[core] = value
            else:
                _rate(value, effective, core, problems, f"{where}.{B.NEURONCORES_IN_USE}", B.EFFECTIVE_FLOPS)
    return NeuroncoreCounters(cores, flops, effective, in_use, where, problems)


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
    limit=S.MAX_FLOPS,
)
FAM_EFFECTIVE_FLOPS = S.PromFamily(
    "neuroncore_effective_floating_point_operations",
    S.COUNTER,
    "Effective floating point operations of the NeuronCore",
    S.CORE_SCOPE,
    limit=S.MAX_FLOPS,
)


def gauges(value: NeuroncoreCounters) -> Iterator[S.PromSample]:
    yield S.PromSample(FAM_UTIL, (), value.utilization(), 100.0, ())
    for core, physical in value.physical().items():
        yield S.PromSample(FAM_PHYSICAL, (core,), physical, 100.0, ())


def counts(value: NeuroncoreCounters, period: float) -> Iterator[S.PromCount]:
    """FLOPs over the period: the rate x the period."""
    if value.flops:
        yield S.PromCount(FAM_FLOPS, (), value.flops, period)
    if value.effective_flops:
        yield S.PromCount(FAM_EFFECTIVE_FLOPS, (), value.effective_flops, period)


CW_UTIL = S.CwMetric("NeuronCoreUtilization", S.PERCENT, S.CORE_DIMS)
CW_FLOPS = S.CwMetric("NeuronCoreFlops", S.COUNT_PER_SECOND, S.CORE_DIMS)
CW_EFFECTIVE_FLOPS = S.CwMetric("NeuronCoreEffectiveFlops", S.COUNT_PER_SECOND, S.CORE_DIMS)
CW_PHYSICAL = S.CwMetric("PhysicalNeuronCoreUtilization", S.PERCENT, S.PHYSICAL_CORE_DIMS)


def datums(value: NeuroncoreCounters, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    utilization, physical = value.utilization(), value.physical()
    for core in value.cores:
        key = (core,)
        if (util := utilization.get(core)) is not None:
            yield CW_UTIL, key, "", util
        if (flops := value.flops.get(core)) is not None:
            yield CW_FLOPS, key, "", flops
        if (effective := value.effective_flops.get(core)) is not None:
            yield CW_EFFECTIVE_FLOPS, key, "", effective
        for name, pvalue in physical.get(core, {}).items():
            yield CW_PHYSICAL, (core, name), "", pvalue


# ---- the timeline and values summed over the runtimes -----------------------------------------------------------
TRACK_UTIL = S.Track("utilization", "neuroncore_utilization", "percent", S.CORE_TRACK, when=S.PERIOD, digits=2)
TRACK_PHYSICAL = S.Track(
    "physical utilization",
    "neuroncore_physical_utilization",
    "percent",
    S.CORE_TRACK,
    when=S.PERIOD,
    digits=2,
    per_runtime=False,
)
TRACK_FLOPS = S.Track("flops", "flops", "flops", S.CORE_TRACK, when=S.PERIOD)


def _by_index(values: dict[str, float]) -> dict[int, float]:
    return {core: v for key, v in values.items() if (core := index(key)) is not None and v - v == 0.0}


def timeline(value: NeuroncoreCounters) -> Iterator[S.TimelineSample]:
    """Per NeuronCore with a utilization (in index order): utilization, FLOP/s, physical cores' utilization."""
    utilization = _by_index(value.utilization())
    flops = _by_index(value.flops)
    physical: dict[int, dict[str, float]] = {}
    for key, phys in value.physical().items():
        core = index(key)
        if core is not None and phys:
            physical[core] = {name: v for name, v in sorted(phys.items()) if v - v == 0.0}
    for core in sorted(utilization):
        at = (str(core),)
        yield TRACK_UTIL, at, {"percent": utilization[core]}
        if core in flops:
            yield TRACK_FLOPS, at, {"flops": flops[core]}
        if physical.get(core):
            yield TRACK_PHYSICAL, at, physical[core]


def utilization_by_core(value: NeuroncoreCounters) -> dict[str, dict[str, float]]:
    """Every NeuronCore in use -> {"percent": its utilization} ({} when the report gives none)."""
    utilization = value.utilization()
    out: dict[str, dict[str, float]] = {}
    for key in value.cores:
        core = index(key)
        if core is not None:
            util = utilization.get(key)
            out[str(core)] = {"percent": util} if util is not None else {}
    return out


def physical_by_core(value: NeuroncoreCounters) -> dict[str, dict[str, float]]:
    """NeuronCore -> physical core -> utilization percent (logical cores with a breakdown)."""
    return {str(core): phys for key, phys in value.physical().items() if (core := index(key)) is not None and phys}


def runtime_facts(value: NeuroncoreCounters, fresh_period: float | None, per_device: int) -> S.RuntimeFacts:
    """The NeuronCores in use and their utilization (the period's when fresh) -- det's hang inference reads them."""
    return S.RuntimeFacts(
        cores_in_use=frozenset(core for core in (index(key) for key in value.cores) if core is not None),
        utilization=_by_index(value.utilization()),
        utilization_period=fresh_period,
    )


FAM_UTIL_TOTAL = S.PromFamily(
    "neuroncore_utilization_total_ratio",
    S.GAUGE,
    "NeuronCore utilization summed over every runtime that reports the core",
    S.INSTANCE_SCOPE,
    ("neuroncore",),
)
# a NeuronCore's utilization summed over the runtimes on it: neuroncore_utilization_total_ratio, the timeline's
# core utilization, neuron-monitor-top's core and device bars
UTILIZATION_SUM = S.RuntimeSum(
    "neuroncore_utilization",
    utilization_by_core,
    source=FAM_UTIL,
    total=FAM_UTIL_TOTAL,
    track=TRACK_UTIL,
    shared_only=True,
    top=S.TOP_CORE_UTILIZATION,
    series=("percent",),
)
PHYSICAL_SUM = S.RuntimeSum(
    "neuroncore_physical_utilization", physical_by_core, track=TRACK_PHYSICAL, top=S.TOP_CORE_PHYSICAL
)


SPEC = S.GroupSpec(
    name=N.NEURONCORE_COUNTERS,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_UTIL, FAM_PHYSICAL, FAM_FLOPS, FAM_EFFECTIVE_FLOPS),
    gauges=gauges,
    counts=counts,
    counts_use_period=True,
    uncounted=(((B.NEURONCORES_IN_USE,), False), ((), True), ((B.FLOPS, B.EFFECTIVE_FLOPS), True)),  # all but FLOPs
    cloudwatch=(CW_UTIL, CW_FLOPS, CW_EFFECTIVE_FLOPS, CW_PHYSICAL),
    datums=datums,
    tracks=(TRACK_UTIL, TRACK_PHYSICAL, TRACK_FLOPS),
    timeline=timeline,
    timeline_order=40,
    sums=(UTILIZATION_SUM, PHYSICAL_SUM),
    runtime_facts=runtime_facts,
)
