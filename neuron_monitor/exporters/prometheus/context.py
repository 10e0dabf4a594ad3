"""What the group shapers share while one report is turned into families: label prefixes, pods, counter totals,
and ``emit``, which files a spec's samples (``neuron_monitor.schema.spec.PromSample``) under their labels.

Series keep their labels from one report to the next, so their label tuples are kept too (``LabelTable``, one per
``SnapshotBuilder``): a sample's tuple is looked up by its batch's base labels and its key instead of being built
again, and the families of consecutive reports share the same tuple objects, which the label guard and the
renderer compare by identity first."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from neuron_monitor.exporters.prometheus.families import FamilySet
from neuron_monitor.exporters.prometheus.labels import PodMap, kept_string
from neuron_monitor.exporters.prometheus.ledger import Totals
from neuron_monitor.exporters.prometheus.series_limit import SeriesLimit
from neuron_monitor.schema.spec import CORE_SCOPE, RUNTIME_SCOPE, PromFamily, PromSample

Labels = tuple[str, ...]
COUNTERS: Labels = ("\0counters",)  # the suffix under which counters' tuples are kept, by ledger key
_CORE_THEN: Labels = ("\0core",)  # the base of core-scoped tuples with a suffix (no label value is this)
TABLE_FLOOR = 16_384  # label tuples a table keeps at least before it starts over (see ``LabelTable.start``)


class LabelTable:
    """Label tuples by (base labels, suffix) and key, kept across reports. Bounded: ``start`` (before each
    shaping) empties it once it holds more than twice the tuples the previous report used, or ``TABLE_FLOOR``."""

    __slots__ = ("heads", "plans", "size", "used")

    def __init__(self) -> None:
        self.heads: dict[tuple[Labels, Labels], dict[object, Labels]] = {}
        self.plans: dict[Labels, dict[Labels, tuple[PromFamily, Labels | None]]] = {}
        self.size = 0  # tuples held
        self.used = 0  # series of the newest report shaped

    def start(self) -> None:
        """Before a report is shaped (``used``: the series of the previous one)."""
        if self.size > max(2 * self.used, TABLE_FLOOR):
            self.clear()

    def clear(self) -> None:
        """Forget every tuple (a report whose label values were over the cap was shaped with them, or a shaping
        did not finish: malformed, or let go part way)."""
        self.heads.clear()
        self.plans.clear()
        self.size = 0

    def of(self, base: Labels, suffix: Labels) -> dict[object, Labels]:
        """The tuples of ``base`` + key + ``suffix``, by key (filled by the caller as keys are met)."""
        at = (base, suffix)
        heads = self.heads.get(at)
        if heads is None:
            heads = self.heads[at] = {}
        return heads

    def counters(self, base: Labels) -> dict[Labels, tuple[PromFamily, Labels | None]]:
        """A runtime's counters by ledger key: the family, and the labels (None in the core scope: the core's
        labels then) under the runtime's ``base`` labels (filled by the caller)."""
        plans = self.plans.get(base)
        if plans is None:
            plans = self.plans[base] = {}
        return plans


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
    table: LabelTable = field(default_factory=LabelTable)  # label tuples kept across reports (the builder's)
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
        table = self.table
        added = 0
        for family, prefix, values, divisor, suffix in batches:
            if limit.limit:
                if limit.cut:
                    break
                values = limit.take(values)
            target = targets.get(family)
            if target is None:
                target = self.samples_of(family)
            scope = family.scope
            if scope == CORE_SCOPE:
                assert core_labels is not None
                if prefix:  # the core is in the prefix
                    base = core_labels(prefix[0]) + prefix[1:]
                elif suffix:  # keyed by the core's labels
                    heads = table.of(_CORE_THEN, suffix)
                    for core, value in values.items():
                        head = core_labels(core)
                        labels = heads.get(head)
                        if labels is None:
                            labels = heads[head] = head + suffix
                            added += 1
                        target[labels] = value / divisor
                    continue
                else:
                    for core, value in values.items():
                        target[core_labels(core)] = value / divisor
                    continue
            else:
                base = (*(runtime_labels if scope == RUNTIME_SCOPE else self.inst_values), *prefix)
                if not family.labels:  # one value: keyed by None
                    heads = table.of(base, suffix)
                    labels = heads.get(None)
                    if labels is None:
                        labels = heads[None] = (*base, *suffix)
                        added += 1
                    for value in values.values():
                        target[labels] = value / divisor
                    continue
            heads = table.of(base, suffix)
            for key, value in values.items():
                labels = heads.get(key)
                if labels is None:
                    labels = heads[key] = (*base, key, *suffix)
                    added += 1
                target[labels] = value / divisor
        table.size += added
