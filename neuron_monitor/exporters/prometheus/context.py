"""What the group shapers share while one report is turned into families: label prefixes, pods, the ledger."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.exporters.prometheus.families import FamilySet
from neuron_monitor.exporters.prometheus.labels import K8S_LABELS, PodMap
from neuron_monitor.exporters.prometheus.ledger import LedgerUpdate
from neuron_monitor.exporters.prometheus.values import group_error


@dataclass
class ShapeContext:
    fams: FamilySet
    update: LedgerUpdate
    inst_names: tuple[str, ...]
    inst_values: tuple[str, ...]
    k8s: bool
    pods: PodMap
    cores_per_device: int
    groups_seen: set[str] = field(default_factory=set)
    groups_failed: set[str] = field(default_factory=set)
    group_errors: Counter[str] = field(default_factory=Counter)
    min_period: float = 0.0

    @property
    def runtime_names(self) -> tuple[str, ...]:
        return (*self.inst_names, "runtime_tag", *(K8S_LABELS if self.k8s else ()))

    @property
    def core_names(self) -> tuple[str, ...]:
        return (*self.runtime_names, "neuroncore", "neuron_device_index")

    def device_of(self, core: str) -> str:
        if self.cores_per_device > 0 and core.isdigit():
            return str(int(core) // self.cores_per_device)
        return ""

    def check_group(self, name: str, obj: dict[str, Any], where: str, fresh: bool) -> bool:
        """Record a group's period and error for the self-metrics; True when its data may be used."""
        self.groups_seen.add(name)
        period = obj.get("period")
        if isinstance(period, (int, float)) and not isinstance(period, bool) and period > 0:
            self.min_period = period if self.min_period <= 0 else min(self.min_period, period)
        if group_error(obj, where):
            self.groups_failed.add(name)
            if fresh:
                self.group_errors[name] += 1
            return False
        return True
