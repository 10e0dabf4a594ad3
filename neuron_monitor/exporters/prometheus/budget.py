"""The series budget: which series a node serves by default, and ``--series-detail full`` for all of them.

A fleet pays for every series of every node (a 1,000-node fleet at 2,800 series per node is 2.8 million), so by
default the exporter leaves out detail that no dashboard panel, alert or recording rule reads. What each family
keeps is declared in its group's spec (``PromFamily.budget``, see ``neuron_monitor.schema.spec.Budget``): served
only with full detail (per-core outcome counters, memory high-water marks, per-model series, the driver's
per-device healthy flag that the health verdict carries), only some label values (device latency p50 and p99), or a
series only from the first report in which it is not zero (a memory category the device never used, a fault-event
kind that never counted: such a counter is born at its first count, so the dashboard counts a series' first
appearance as events, not ``increase()`` alone). Two families the exporter itself adds are thinned here:
``neuroncore_info`` (per-core series carry ``neuron_device_index`` under ``--core-labels device``, the default, so the
join table is served only under ``--core-labels aws``) and the per-core totals across runtimes whose ``RuntimeSum``
says ``shared_only`` (``neuroncore_utilization_total_ratio``), served for the cores that more than one runtime reports
(for a core one runtime holds it equals that runtime's ``neuroncore_utilization_ratio``).

AWS's families (those AWS's ``neuron-monitor-prometheus.py`` serves) are never thinned: their names, labels and
series stay as AWS's exporter serves them. ``--series-detail full`` skips this module: the families are served
exactly as shaped, byte for byte what the exporter served before the budget existed.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.cores import FAMILY as CORE_INFO_FAMILY
from neuron_monitor.exporters.prometheus.families import FamilySet
from neuron_monitor.schema.spec import PromFamily, family_budgets, registry

BUDGET = "budget"
FULL = "full"
SERIES_DETAILS = (BUDGET, FULL)
MAX_REMEMBERED = 1 << 16  # series remembered as once non-zero, per family (the memory starts over beyond this)

Labels = tuple[str, ...]


class SeriesBudget:
    """Thins one exporter's families report after report; remembers which series have been non-zero."""

    def __init__(self, core_device_label: bool = True) -> None:
        self.budgets = family_budgets()
        self.drop_core_info = core_device_label
        self._nonzero: dict[str, set[Labels]] = {}

    def thin(self, fams: FamilySet) -> None:
        """Remove from ``fams`` (one report's families, in place) what the default budget leaves out."""
        by_name = fams.by_name
        if self.drop_core_info:
            by_name.pop(CORE_INFO_FAMILY, None)
        self._shared_cores_only(fams)
        for name, budget in self.budgets.items():
            family = by_name.get(name)
            if family is None:
                continue
            if not budget.served:
                del by_name[name]
                continue
            samples = family.samples
            if budget.only:
                at, values = family.labelnames.index(budget.label), budget.only
                samples = {labels: v for labels, v in samples.items() if labels[at] in values}
            if budget.nonzero:
                seen = self._nonzero.setdefault(name, set())
                if len(seen) > MAX_REMEMBERED:
                    seen.clear()
                for labels, v in samples.items():
                    if v != 0.0:
                        seen.add(labels)
                samples = {labels: v for labels, v in samples.items() if labels in seen}
            family.samples = samples

    @staticmethod
    def _shared_cores_only(fams: FamilySet) -> None:
        """Each ``shared_only`` total (``RuntimeSum``) for the cores more than one runtime reports."""
        for total_family, source_family in _SHARED_ONLY:
            totals, per_runtime = fams.by_name.get(total_family.name), fams.by_name.get(source_family.name)
            if totals is None:
                continue
            runtimes: dict[str, int] = {}
            if per_runtime is not None:
                at = per_runtime.labelnames.index("neuroncore")
                for labels in per_runtime.samples:
                    runtimes[labels[at]] = runtimes.get(labels[at], 0) + 1
            at = totals.labelnames.index("neuroncore")
            totals.samples = {labels: v for labels, v in totals.samples.items() if runtimes.get(labels[at], 0) > 1}


# (total, source) of each cross-runtime sum the budget serves only for shared cores
_SHARED_ONLY: tuple[tuple[PromFamily, PromFamily], ...] = tuple(
    (s.total, s.source)
    for spec in registry().all()
    for s in spec.sums
    if s.shared_only and s.total is not None and s.source is not None
)
