"""What the group shapers share while one report is turned into families: label prefixes, pods, counter totals,
and ``emit``, which files a spec's samples (``neuron_monitor.schema.spec.PromSample``) under their labels."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from neuron_monitor.exporters.prometheus.families import FamilySet
from neuron_monitor.exporters.prometheus.labels import PodMap, kept_string
from neuron_monitor.exporters.prometheus.ledger import Totals
from neuron_monitor.exporters.prometheus.series_limit import SeriesLimit
from neuron_monitor.schema.spec import CORE_SCOPE, RUNTIME_SCOPE, PromFamily, PromSample

Labels = tuple[str, ...]


@dataclass
class ShapeContext:
    fams: FamilySet
    totals: Totals  # the counter ledger as committed with this report
    inst_names: Labels
    inst_values: Labels
    k8s: bool
    pods: PodMap
    cores_per_device: int
    core_device_label: bool = True  # False (--core-labels aws): per-core series carry AWS's label set exactly
    limit: SeriesLimit = field(default_factory=SeriesLimit)  # --max-series-per-report (see ``series_limit``)
    full_detail: bool = False  # --series-detail full (families the budget thins while shaping: shape_sources)
    _targets: dict[PromFamily, dict[Labels, float]] = field(default_factory=dict)

    @property
    def runtime_names(self) -> Labels:
        return (*self.inst_names, "runtime_tag", *(self.pods.names if self.k8s else ()))

    @property
    def core_names(self) -> Labels:
        if self.core_device_label:
            return (*self.runtime_names, "neuroncore", "neuron_device_index")
        return (*self.runtime_names, "neuroncore")

    def device_of(self, core: str) -> str:
        if self.cores_per_device > 0 and core.isdigit():
            return kept_string(str(int(core) // self.cores_per_device))
        return ""

    def samples_of(self, family: PromFamily) -> dict[Labels, float]:
        """The sample map of a spec's family, created with its scope's label names on first use."""
        target = self._targets.get(family)
        if target is None:
            scope = family.scope
            base = (
                self.core_names
                if scope == CORE_SCOPE
                else self.runtime_names
                if scope == RUNTIME_SCOPE
                else self.inst_names
            )
            target = self.fams.family(family.name, family.kind, family.help, (*base, *family.labels)).samples
            self._targets[family] = target
        return target

    def emit(
        self,
        batches: Iterable[PromSample],
        runtime_labels: Labels = (),
        core_labels: Callable[[str], Labels] | None = None,
    ) -> None:
        """File a spec's sample batches under their labels (see ``PromSample``), as many as the limit takes."""
        targets = self._targets
        limit = self.limit
        for family, prefix, values, divisor, suffix in batches:
            if limit.limit:
                if limit.cut:
                    return
                values = limit.take(values)
            target = targets.get(family)
            if target is None:
                target = self.samples_of(family)
            scope = family.scope
            if scope == CORE_SCOPE:
                assert core_labels is not None
                if prefix:  # the core is in the prefix
                    base = core_labels(prefix[0]) + prefix[1:]
                    for key, value in values.items():
                        target[(*base, key, *suffix)] = value / divisor
                elif suffix:
                    for core, value in values.items():
                        target[core_labels(core) + suffix] = value / divisor
                else:
                    for core, value in values.items():
                        target[core_labels(core)] = value / divisor
                continue
            base = (*(runtime_labels if scope == RUNTIME_SCOPE else self.inst_values), *prefix)
            if family.labels:
                for key, value in values.items():
                    target[(*base, key, *suffix)] = value / divisor
            else:
                for value in values.values():
                    target[(*base, *suffix)] = value / divisor
