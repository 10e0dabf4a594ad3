"""``memory_used`` (runtime): the runtime's memory in bytes, on the host and on the Neuron devices, broken down by
host category and by NeuronCore and category, and the models it has loaded (gauges)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.memory_used import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import count, finite, human_bytes
from neuron_monitor.schema.values import Problems, index, mapping, number, numbers, sequence, text


@dataclass(slots=True)
class LoadedModel:
    model_id: str
    name: str
    uuid: str
    running: bool
    memory: dict[str, float]  # location (host, neuron_device) -> bytes, summed over the subgraphs
    placement: tuple[tuple[int, int], ...]  # (device, core within the device) of each subgraph that names both


@dataclass(slots=True)
class MemoryUsed:
    host: float | None
    neuron_device: float | None
    host_breakdown: dict[str, float] | None  # host category -> bytes
    per_core: dict[str, dict[str, float]] | None  # NeuronCore index as written -> category -> bytes
    models: list[LoadedModel] | None  # None when the report lists none (not even an empty list)
    model_count: int  # entries of ``loaded_models`` (a null entry counts, as AWS's exporter counts it)

    def cores_holding_memory(self) -> list[str]:
        """The NeuronCores (as written) on which this runtime holds any memory."""
        return [core for core, cats in (self.per_core or {}).items() if any(cats.values())]


def _model(model: dict[str, Any], problems: Problems, where: str) -> LoadedModel:
    is_running = model.get(B.MODEL_IS_RUNNING)
    if not isinstance(is_running, bool) and is_running is not None:
        number(is_running, problems, where, B.MODEL_IS_RUNNING)
    sums = {B.LOCATION_HOST: 0.0, B.LOCATION_NEURON_DEVICE: 0.0}
    placement: list[tuple[int, int]] = []
    subgraphs = mapping(model.get(B.MODEL_SUBGRAPHS), problems, where, B.MODEL_SUBGRAPHS) or {}
    for sg_name, sg in subgraphs.items():
        swhere = f"{where}.{B.MODEL_SUBGRAPHS}"
        sg = mapping(sg, problems, swhere, sg_name) or {}
        swhere = f"{swhere}.{sg_name}"
        used = mapping(sg.get(B.SUBGRAPH_MEMORY_USED_BYTES), problems, swhere, B.SUBGRAPH_MEMORY_USED_BYTES) or {}
        for location in sums:
            sums[location] += number(used.get(location), problems, swhere, location) or 0.0
        nc, nd = index(sg.get(B.SUBGRAPH_NEURONCORE_INDEX)), index(sg.get(B.SUBGRAPH_NEURON_DEVICE_INDEX))
        if nc is not None and nd is not None:
            placement.append((nd, nc))
    return LoadedModel(
        model_id=text(model.get(B.MODEL_ID), problems, where, B.MODEL_ID),
        name=text(model.get(B.MODEL_NAME), problems, where, B.MODEL_NAME),
        uuid=text(model.get(B.MODEL_UUID), problems, where, B.MODEL_UUID),
        running=bool(is_running),
        memory=sums,
        placement=tuple(placement),
    )


def read(body: dict[str, Any], where: str, problems: Problems) -> MemoryUsed:
    used = mapping(body.get(B.NEURON_RUNTIME_USED_BYTES), problems, where, B.NEURON_RUNTIME_USED_BYTES) or {}
    uwhere = f"{where}.{B.NEURON_RUNTIME_USED_BYTES}"
    host = number(used.get(B.LOCATION_HOST), problems, uwhere, B.LOCATION_HOST)
    device = number(used.get(B.LOCATION_NEURON_DEVICE), problems, uwhere, B.LOCATION_NEURON_DEVICE)
    if device is None:
        device = number(used.get(B.LOCATION_DEVICE_ALIAS), problems, uwhere, B.LOCATION_DEVICE_ALIAS)
    breakdown = mapping(used.get(B.USAGE_BREAKDOWN), problems, uwhere, B.USAGE_BREAKDOWN) or {}
    bwhere = f"{uwhere}.{B.USAGE_BREAKDOWN}"
    host_breakdown = numbers(breakdown.get(B.LOCATION_HOST), problems, bwhere, B.LOCATION_HOST)
    per_core: dict[str, dict[str, float]] | None = None
    cores = mapping(breakdown.get(B.NEURONCORE_MEMORY_USAGE), problems, bwhere, B.NEURONCORE_MEMORY_USAGE)
    if cores is not None:
        per_core = {}
        cwhere = f"{bwhere}.{B.NEURONCORE_MEMORY_USAGE}"
        for core, cats in cores.items():
            values = numbers(cats, problems, cwhere, core)
            if values is not None:
                per_core[core] = values
    models: list[LoadedModel] | None = None
    listed = sequence(body.get(B.LOADED_MODELS), problems, where, B.LOADED_MODELS)
    if listed is not None:
        models = []
        for i, model in enumerate(listed):
            model = mapping(model, problems, f"{where}.{B.LOADED_MODELS}", f"[{i}]")
            if model is not None:
                models.append(_model(model, problems, f"{where}.{B.LOADED_MODELS}[{i}]"))
    return MemoryUsed(host, device, host_breakdown, per_core, models, len(listed) if listed is not None else 0)


FAM_USED = S.PromFamily(
    "neuron_runtime_memory_used_bytes", S.GAUGE, "Runtime memory used bytes", S.RUNTIME_SCOPE, ("memory_location",)
)
FAM_HOST = S.PromFamily(
    "neuron_runtime_host_memory_used_bytes",
    S.GAUGE,
    "Host memory used by the runtime, by category, in bytes",
    S.RUNTIME_SCOPE,
    ("category",),
    budget=S.DETAIL,  # the runtime's host total stays in neuron_runtime_memory_used_bytes{memory_location="host"}
)
FAM_CORE = {
    kind: S.PromFamily(
        f"neuroncore_memory_usage_{kind}",
        S.GAUGE,
        f"NeuronCore memory utilization for {kind}",
        S.CORE_SCOPE,
        ("memory_location",),
    )
    for kind in B.MEMORY_CATEGORIES
}
FAM_MODELS = S.PromFamily("neuron_runtime_loaded_models", S.GAUGE, "Models loaded by the runtime", S.RUNTIME_SCOPE)
FAM_MODEL_RUNNING = S.PromFamily(
    "neuron_runtime_model_running",
    S.GAUGE,
    "1 if a loaded model is started, else 0",
    S.RUNTIME_SCOPE,
    ("model_id", "model_name", "model_uuid"),
    budget=S.DETAIL,  # one series per loaded model; neuron_runtime_loaded_models counts them
)
FAM_MODEL_MEMORY = S.PromFamily(
    "neuron_runtime_model_memory_used_bytes",
    S.GAUGE,
    "Memory used by a loaded model's subgraphs, in bytes",
    S.RUNTIME_SCOPE,
    ("model_id", "memory_location"),
    budget=S.DETAIL,  # per model; the runtime's totals stay in neuron_runtime_memory_used_bytes
)
_CORE_FAMILIES = tuple(FAM_CORE.items())


def gauges(value: MemoryUsed) -> Iterator[S.PromSample]:
    totals = {B.LOCATION_HOST: value.host, B.LOCATION_NEURON_DEVICE: value.neuron_device}
    yield S.PromSample(FAM_USED, (), {k: v for k, v in totals.items() if v is not None}, 1.0, ())
    if value.host_breakdown:
        yield S.PromSample(FAM_HOST, (), value.host_breakdown, 1.0, ())
    per_core = value.per_core
    if per_core:
        for kind, family in _CORE_FAMILIES:  # AWS's exporter sets memory_location to None
            by_core = {core: amount for core, cats in per_core.items() if (amount := cats.get(kind)) is not None}
            yield S.PromSample(family, (), by_core, 1.0, ("None",))
    if value.models is not None:
        yield S.PromSample(FAM_MODELS, (), {"": float(value.model_count)}, 1.0, ())
        for m in value.models:
            yield S.PromSample(FAM_MODEL_RUNNING, (m.model_id, m.name), {m.uuid: 1.0 if m.running else 0.0}, 1.0, ())
        for m in value.models:
            yield S.PromSample(FAM_MODEL_MEMORY, (m.model_id,), m.memory, 1.0, ())


CW_HOST = S.CwMetric("RuntimeHostMemoryUsed", S.BYTES, S.RUNTIME_DIMS)
CW_DEVICE = S.CwMetric("RuntimeDeviceMemoryUsed", S.BYTES, S.RUNTIME_DIMS)
CW_HOST_CATEGORY = S.CwMetric("RuntimeHostMemory", S.BYTES, S.RUNTIME_DIMS, keyed=True)
CW_CORE_CATEGORY = S.CwMetric("NeuronCoreMemoryUsage", S.BYTES, S.CORE_DIMS, keyed=True)
CW_CORE_TOTAL = S.CwMetric("NeuronCoreMemoryUsageTotal", S.BYTES, S.CORE_DIMS)


def datums(value: MemoryUsed, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    if value.host is not None:
        yield CW_HOST, (), "", value.host
    if value.neuron_device is not None:
        yield CW_DEVICE, (), "", value.neuron_device
    for category, amount in (value.host_breakdown or {}).items():
        yield CW_HOST_CATEGORY, (), category, amount
    for core, cats in (value.per_core or {}).items():
        key = (core,)
        for category, amount in cats.items():
            yield CW_CORE_CATEGORY, key, category, amount
        yield CW_CORE_TOTAL, key, "", sum(cats.values())


TRACK_HOST = S.Track("host memory", "runtime_host_memory", "bytes", S.RUNTIME_TRACK, when=S.ALWAYS, host=True)
# device memory by category, summed per device (per NeuronCore with --group-by neuroncore) and over the runtimes
TRACK_DEVICE = S.Track("memory", "device_memory", "bytes", S.DEVICE_TRACK, when=S.ALWAYS, from_cores=True, integer=True)
COL_HOST = S.TopColumn(S.TOP_RUNTIMES, "host", 7, order=20)
COL_DEVICE = S.TopColumn(S.TOP_RUNTIMES, "device", 8, order=30, min_width=96)


def timeline(value: MemoryUsed) -> Iterator[S.TimelineSample]:
    """Host memory (bytes); device memory per NeuronCore by category."""
    host = finite(value.host)
    if host is not None:
        yield TRACK_HOST, (), {"bytes": int(host)}
    for key, cats in (value.per_core or {}).items():
        core = index(key)
        if core is not None:
            yield TRACK_DEVICE, (str(core),), {c: count(cats.get(c)) for c in B.MEMORY_CATEGORIES}


def memory_by_core(value: MemoryUsed) -> dict[str, dict[str, float]]:
    """NeuronCore -> category -> bytes (every category the report names)."""
    out: dict[str, dict[str, float]] = {}
    for key, cats in (value.per_core or {}).items():
        core = index(key)
        if core is not None:
            out[str(core)] = {cat: int(n) for cat, n in cats.items()}
    return out


# a NeuronCore's device memory by category, summed over the runtimes (neuron-monitor-top's memory bars)
# the order of neuron-monitor-top's memory bar runs; categories a newer report adds follow these
BAR_ORDER = (
    B.MEMORY_MODEL_CODE,
    B.MEMORY_TENSORS,
    B.MEMORY_CONSTANTS,
    B.MEMORY_MODEL_SHARED_SCRATCHPAD,
    B.MEMORY_RUNTIME_MEMORY,
)
MEMORY_SUM = S.RuntimeSum(
    "neuroncore_memory", memory_by_core, track=TRACK_DEVICE, integer=True, top=S.TOP_CORE_MEMORY, series=BAR_ORDER
)


def runtime_facts(value: MemoryUsed, fresh_period: float | None, per_device: int) -> S.RuntimeFacts:
    """The NeuronCores holding the runtime's memory, those its loaded models run on, and how many it has loaded."""
    memory_cores: frozenset[int] | None = None
    if value.per_core is not None:
        memory_cores = frozenset(
            core
            for key, cats in value.per_core.items()
            if (core := index(key)) is not None and any(count(cats.get(c)) for c in B.MEMORY_CATEGORIES)
        )
    if value.models is None:
        return S.RuntimeFacts(memory_cores=memory_cores)
    model_cores = frozenset(nd * per_device + nc for m in value.models for nd, nc in m.placement)
    return S.RuntimeFacts(memory_cores=memory_cores, model_cores=model_cores, models=value.model_count)


def top(value: MemoryUsed, period: float | None) -> Iterator[S.TopCell]:
    """Host and device memory of the runtime."""
    yield COL_HOST, (), human_bytes(int(value.host) if value.host is not None else None), ""
    device = int(value.neuron_device) if value.neuron_device is not None else None
    yield COL_DEVICE, (), human_bytes(device), ""


def top_models(value: MemoryUsed, cores_per_device: int) -> list[S.TopModel] | None:
    """neuron-monitor-top's models view: each loaded model's name, id, state, bytes and cores (None: none listed),
    the cores numbered across the host as everywhere else (device * cores_per_device + core within the device;
    the core within the device when the report gives no count)."""
    if value.models is None:
        return None
    return [
        S.TopModel(
            name=m.name,
            model_id=m.model_id,
            running=m.running,
            device_bytes=int(m.memory.get(B.LOCATION_NEURON_DEVICE, 0)),
            host_bytes=int(m.memory.get(B.LOCATION_HOST, 0)),
            cores=tuple(sorted({nd * cores_per_device + nc for nd, nc in m.placement})),
        )
        for m in value.models
    ]


SPEC = S.GroupSpec(
    name=N.MEMORY_USED,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_USED, FAM_HOST, *FAM_CORE.values(), FAM_MODELS, FAM_MODEL_RUNNING, FAM_MODEL_MEMORY),
    gauges=gauges,
    cloudwatch=(CW_HOST, CW_DEVICE, CW_HOST_CATEGORY, CW_CORE_CATEGORY, CW_CORE_TOTAL),
    datums=datums,
    tracks=(
        TRACK_HOST,
        TRACK_DEVICE,
    ),
    timeline=timeline,
    timeline_order=30,
    sums=(MEMORY_SUM,),
    top_columns=(COL_HOST, COL_DEVICE),
    top=top,
    top_models=top_models,
    runtime_facts=runtime_facts,
)
