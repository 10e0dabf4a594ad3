"""One report -> one immutable ``Snapshot``: every metric family of that report plus the counters so far.

``SnapshotBuilder.build`` shapes the whole report first and commits the counter ledger only when nothing in it
was malformed, so a rejected report changes nothing. A snapshot is never modified after it is built; the
exporter swaps the newest one in with a single reference assignment, so a scrape sees one report or the next,
never a mixture.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import Family, FamilySet
from neuron_monitor.exporters.prometheus.labels import PodMap, instance_labels
from neuron_monitor.exporters.prometheus.ledger import CounterLedger
from neuron_monitor.exporters.prometheus.runtime_metrics import RuntimeShaper
from neuron_monitor.exporters.prometheus.system_metrics import shape_info, shape_system
from neuron_monitor.exporters.prometheus.values import mapping, number, sequence


@dataclass(frozen=True)
class Snapshot:
    families: tuple[Family, ...]
    series: int
    runtimes: int
    min_period: float  # the shortest group period in the report (its cadence), 0 if none
    report_time: float | None
    groups_seen: frozenset[str] = frozenset()
    groups_failed: frozenset[str] = frozenset()
    group_errors: Counter[str] = field(default_factory=Counter)


@dataclass
class ShapeOptions:
    instance_labels_everywhere: bool = True  # AWS-compatible default; False keeps them on instance_info only
    always_k8s_labels: bool = False  # --enable-k8s-info: pod labels even before a report carries k8s info


class SnapshotBuilder:
    def __init__(self, options: ShapeOptions | None = None) -> None:
        self.options = options or ShapeOptions()
        self.ledger = CounterLedger()

    def build(self, report: dict[str, Any]) -> Snapshot:
        """Shape a report; raises ``MalformedReport`` (and changes nothing) if a value has a wrong type."""
        update = self.ledger.begin()
        instance_info = mapping(report.get("instance_info"), "instance_info")
        hardware_info = mapping(report.get("neuron_hardware_info"), "neuron_hardware_info")
        k8s_info = mapping(report.get("neuron_k8s_info"), "neuron_k8s_info")
        if self.options.instance_labels_everywhere:
            inst_names, inst_values = instance_labels(instance_info)
        else:
            inst_names, inst_values = (), ()
        per_device = number((hardware_info or {}).get("neuroncore_per_device_count"), "neuron_hardware_info")
        ctx = ShapeContext(
            fams=FamilySet(),
            update=update,
            inst_names=inst_names,
            inst_values=inst_values,
            k8s=k8s_info is not None or self.options.always_k8s_labels,
            pods=PodMap(k8s_info),
            cores_per_device=int(per_device) if per_device and per_device > 0 else 0,
        )
        shape_system(ctx, mapping(report.get("system_data"), "system_data") or {})
        shape_info(ctx, instance_info, hardware_info)
        runtimes = sequence(report.get("neuron_runtime_data"), "neuron_runtime_data") or []
        for i, entry in enumerate(runtimes):
            where = f"neuron_runtime_data[{i}]"
            entry = mapping(entry, where)
            if entry is not None:
                RuntimeShaper(ctx, entry, where).shape()
        report_time = number(report.get("report_time"), "report_time")
        update.commit()
        return Snapshot(
            families=tuple(ctx.fams.families()),
            series=ctx.fams.series_count(),
            runtimes=len(runtimes),
            min_period=ctx.min_period,
            report_time=report_time,
            groups_seen=frozenset(ctx.groups_seen),
            groups_failed=frozenset(ctx.groups_failed),
            group_errors=ctx.group_errors,
        )
