"""Runtime-level groups (``neuron_runtime_data[].report``) -> gauge samples, plus the runtime's counters.

Compatible with AWS's exporter: NeuronCore utilization and runtime vCPU as ratios (percent / 100), memory in
bytes, latency in seconds, execution counters (accumulated by ``counting``). Added: device latency,
per-physical-core utilization (``v3d``), FLOP counters, host memory breakdown and loaded models.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.counting import runtime_identity
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO
from neuron_monitor.exporters.prometheus.labels import NO_POD
from neuron_monitor.exporters.prometheus.ledger import Subject
from neuron_monitor.exporters.prometheus.values import group_error, mapping, number, sequence, text

NEURONCORE_MEMORY_TYPES: tuple[str, ...] = (
    "constants",
    "model_code",
    "model_shared_scratchpad",
    "runtime_memory",
    "tensors",
)
FLOP_HELP: dict[str, str] = {
    "neuroncore_floating_point_operations": "Floating point operations executed by the NeuronCore",
    "neuroncore_effective_floating_point_operations": "Effective floating point operations of the NeuronCore",
}
# runtime counters: ledger key prefix -> (family, help, label name)
RUNTIME_COUNTERS: dict[str, tuple[str, str]] = {
    "execution_errors": ("Execution errors total", "error_type"),
    "execution_status": ("Execution status total", "status_type"),
}


class RuntimeShaper:
    """Shapes one runtime entry; ``core_labels`` caches the label tuple of each NeuronCore."""

    def __init__(self, ctx: ShapeContext, entry: dict[str, Any], where: str) -> None:
        self.ctx = ctx
        self.where = where
        self.pid, self.tag = runtime_identity(entry, where)
        self.subject: Subject = ("rt", self.tag)
        self.entry = entry
        self.report = mapping(entry.get("report"), f"{where}.report") or {}
        self._core_labels: dict[str, tuple[str, ...]] = {}
        self.runtime_labels: tuple[str, ...] = ()

    # -- labels -------------------------------------------------------------------------------------------
    def _cores_used(self) -> list[str]:
        counters = self.report.get("neuroncore_counters")
        if isinstance(counters, dict) and isinstance(counters.get("neuroncores_in_use"), dict):
            return list(counters["neuroncores_in_use"])
        memory: Any = self.report.get("memory_used")
        try:
            per_core = memory["neuron_runtime_used_bytes"]["usage_breakdown"]["neuroncore_memory_usage"]
            return [i for i, cats in per_core.items() if isinstance(cats, dict) and any(cats.values())]
        except (KeyError, TypeError):
            return []

    def core_labels(self, core: str) -> tuple[str, ...]:
        labels = self._core_labels.get(core)
        if labels is None:
            ctx = self.ctx
            pod = ctx.pods.core(core) if ctx.k8s else ()
            if ctx.core_device_label:
                labels = (*ctx.inst_values, self.tag, *pod, core, ctx.device_of(core))
            else:
                labels = (*ctx.inst_values, self.tag, *pod, core)
            self._core_labels[core] = labels
        return labels

    # -- shaping ------------------------------------------------------------------------------------------
    def shape(self) -> None:
        ctx = self.ctx
        if text(self.entry.get("error"), f"{self.where}.error"):
            self._counters()  # no gauges for a runtime in error (as AWS); its counters keep their totals
            return
        pod = (ctx.pods.runtime(self._cores_used()) or NO_POD) if ctx.k8s else ()
        self.runtime_labels = (*ctx.inst_values, self.tag, *pod)
        ctx.fams.family("neuron_runtime", INFO, "Neuron runtime information", (*ctx.runtime_names, "pid")).samples[
            (*self.runtime_labels, self.pid)
        ] = 1.0
        for name, obj in self.report.items():
            handler = _HANDLERS.get(name)
            if handler is None:
                continue  # unknown groups are ignored, as AWS's exporter does
            where = f"{self.where}.report.{name}"
            obj = mapping(obj, where)
            if obj is not None and not group_error(obj, where):
                handler(self, obj, where)
        self._counters()

    def _counters(self) -> None:
        """Emit this runtime's counters as accumulated up to this report."""
        ctx = self.ctx
        if not self.runtime_labels:
            pod = ctx.pods.runtime(self._cores_used()) if ctx.k8s else ()
            self.runtime_labels = (*ctx.inst_values, self.tag, *pod)
        for key, total in ctx.totals.get(self.subject, {}).items():
            family = key[0]
            spec = RUNTIME_COUNTERS.get(family)
            if spec is not None:
                fam = ctx.fams.family(family, COUNTER, spec[0], (*ctx.runtime_names, spec[1]))
                fam.samples[(*self.runtime_labels, key[1])] = total
            else:  # per-core FLOP counters
                fam = ctx.fams.family(family, COUNTER, FLOP_HELP[family], ctx.core_names)
                fam.samples[self.core_labels(key[1])] = total

    def neuroncore_counters(self, obj: dict[str, Any], where: str) -> None:
        ctx = self.ctx
        in_use = mapping(obj.get("neuroncores_in_use"), f"{where}.neuroncores_in_use") or {}
        util = ctx.fams.family(
            "neuroncore_utilization_ratio", GAUGE, "NeuronCore utilization ratio", ctx.core_names
        ).samples
        for core, data in in_use.items():
            cwhere = f"{where}.neuroncores_in_use.{core}"
            data = mapping(data, cwhere)
            if data is None:
                continue
            labels = self.core_labels(core)
            value = number(data.get("neuroncore_utilization"), f"{cwhere}.neuroncore_utilization")
            if value is not None:
                util[labels] = value / 100.0
            v3d = mapping(data.get("v3d"), f"{cwhere}.v3d")
            if v3d:
                phys = ctx.fams.family(
                    "neuroncore_physical_utilization_ratio",
                    GAUGE,
                    "Utilization ratio of each physical NeuronCore of a logical NeuronCore",
                    (*ctx.core_names, "physical_neuroncore"),
                ).samples
                for name, pdata in v3d.items():
                    pwhere = f"{cwhere}.v3d.{name}"
                    pdata = mapping(pdata, pwhere) or {}
                    pvalue = number(pdata.get("neuroncore_utilization"), f"{pwhere}.neuroncore_utilization")
                    if pvalue is not None:
                        phys[(*labels, name)] = pvalue / 100.0

    def execution_stats(self, obj: dict[str, Any], where: str) -> None:
        ctx = self.ctx
        latency = mapping(obj.get("latency_stats"), f"{where}.latency_stats") or {}
        for key, family, help_text in (
            ("total_latency", "execution_latency_seconds", "Execution latency in seconds"),
            ("device_latency", "execution_device_latency_seconds", "Execution latency on the device in seconds"),
        ):
            percentiles = mapping(latency.get(key), f"{where}.latency_stats.{key}")
            if not percentiles:
                continue
            samples = ctx.fams.family(family, GAUGE, help_text, (*ctx.runtime_names, "percentile")).samples
            for pct, value in percentiles.items():
                seconds = number(value, f"{where}.latency_stats.{key}.{pct}")
                if seconds is not None:
                    samples[(*self.runtime_labels, pct)] = seconds

    def memory_used(self, obj: dict[str, Any], where: str) -> None:
        ctx = self.ctx
        used = mapping(obj.get("neuron_runtime_used_bytes"), f"{where}.neuron_runtime_used_bytes") or {}
        totals = ctx.fams.family(
            "neuron_runtime_memory_used_bytes",
            GAUGE,
            "Runtime memory used bytes",
            (*ctx.runtime_names, "memory_location"),
        ).samples
        # "device" is accepted for "neuron_device" (seen in one newer capture)
        for location, keys in (("host", ("host",)), ("neuron_device", ("neuron_device", "device"))):
            for key in keys:
                value = number(used.get(key), f"{where}.neuron_runtime_used_bytes.{key}")
                if value is not None:
                    totals[(*self.runtime_labels, location)] = value
                    break
        breakdown = mapping(used.get("usage_breakdown"), f"{where}.neuron_runtime_used_bytes.usage_breakdown") or {}
        bwhere = f"{where}.neuron_runtime_used_bytes.usage_breakdown"
        host = mapping(breakdown.get("host"), f"{bwhere}.host") or {}
        if host:
            samples = ctx.fams.family(
                "neuron_runtime_host_memory_used_bytes",
                GAUGE,
                "Host memory used by the runtime, by category, in bytes",
                (*ctx.runtime_names, "category"),
            ).samples
            for category, value in host.items():
                amount = number(value, f"{bwhere}.host.{category}")
                if amount is not None:
                    samples[(*self.runtime_labels, category)] = amount
        per_core = mapping(breakdown.get("neuroncore_memory_usage"), f"{bwhere}.neuroncore_memory_usage") or {}
        if per_core:
            names = (*ctx.core_names, "memory_location")
            fams = [
                ctx.fams.family(
                    f"neuroncore_memory_usage_{kind}", GAUGE, f"NeuronCore memory utilization for {kind}", names
                ).samples
                for kind in NEURONCORE_MEMORY_TYPES
            ]
            for core, cats in per_core.items():
                cwhere = f"{bwhere}.neuroncore_memory_usage.{core}"
                cats = mapping(cats, cwhere)
                if cats is None:
                    continue
                labels = (*self.core_labels(core), "None")  # AWS's exporter sets memory_location to None
                for kind, samples in zip(NEURONCORE_MEMORY_TYPES, fams, strict=True):
                    value = number(cats.get(kind), f"{cwhere}.{kind}")
                    if value is not None:
                        samples[labels] = value
        models = sequence(obj.get("loaded_models"), f"{where}.loaded_models")
        if models is not None:
            self._loaded_models(models, f"{where}.loaded_models")

    def _loaded_models(self, models: list[Any], where: str) -> None:
        ctx = self.ctx
        ctx.fams.family(
            "neuron_runtime_loaded_models", GAUGE, "Models loaded by the runtime", ctx.runtime_names
        ).samples[self.runtime_labels] = float(len(models))
        running = ctx.fams.family(
            "neuron_runtime_model_running",
            GAUGE,
            "1 if a loaded model is started, else 0",
            (*ctx.runtime_names, "model_id", "model_name", "model_uuid"),
        ).samples
        memory = ctx.fams.family(
            "neuron_runtime_model_memory_used_bytes",
            GAUGE,
            "Memory used by a loaded model's subgraphs, in bytes",
            (*ctx.runtime_names, "model_id", "memory_location"),
        ).samples
        for i, model in enumerate(models):
            mwhere = f"{where}[{i}]"
            model = mapping(model, mwhere)
            if model is None:
                continue
            model_id = text(model.get("model_id"), f"{mwhere}.model_id")
            is_running = model.get("is_running")
            if not isinstance(is_running, bool) and is_running is not None:
                number(is_running, f"{mwhere}.is_running")
            running[
                (
                    *self.runtime_labels,
                    model_id,
                    text(model.get("name"), f"{mwhere}.name"),
                    text(model.get("uuid"), f"{mwhere}.uuid"),
                )
            ] = 1.0 if is_running else 0.0
            sums = {"host": 0.0, "neuron_device": 0.0}
            for sg_name, sg in (mapping(model.get("subgraphs"), f"{mwhere}.subgraphs") or {}).items():
                swhere = f"{mwhere}.subgraphs.{sg_name}"
                sg = mapping(sg, swhere) or {}
                used = mapping(sg.get("memory_used_bytes"), f"{swhere}.memory_used_bytes") or {}
                for location in sums:
                    sums[location] += number(used.get(location), f"{swhere}.memory_used_bytes.{location}") or 0.0
            for location, value in sums.items():
                memory[(*self.runtime_labels, model_id, location)] = value

    def neuron_runtime_vcpu_usage(self, obj: dict[str, Any], where: str) -> None:
        ctx = self.ctx
        usage = mapping(obj.get("vcpu_usage"), f"{where}.vcpu_usage") or {}
        samples = ctx.fams.family(
            "neuron_runtime_vcpu_usage_ratio",
            GAUGE,
            "Runtime vCPU utilization ratio",
            (*ctx.runtime_names, "usage_type"),
        ).samples
        for usage_type in ("user", "system"):
            value = number(usage.get(usage_type), f"{where}.vcpu_usage.{usage_type}")
            if value is not None:
                samples[(*self.runtime_labels, usage_type)] = value / 100.0


_HANDLERS = {
    "neuroncore_counters": RuntimeShaper.neuroncore_counters,
    "execution_stats": RuntimeShaper.execution_stats,
    "memory_used": RuntimeShaper.memory_used,
    "neuron_runtime_vcpu_usage": RuntimeShaper.neuron_runtime_vcpu_usage,
}
