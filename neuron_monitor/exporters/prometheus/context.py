"""What the group shapers share while one report is turned into families: label prefixes, pods, counter totals."""

from __future__ import annotations

from dataclasses import dataclass

from neuron_monitor.exporters.prometheus.families import FamilySet
from neuron_monitor.exporters.prometheus.labels import K8S_LABELS, PodMap
from neuron_monitor.exporters.prometheus.ledger import Totals


@dataclass
class ShapeContext:
    fams: FamilySet
    totals: Totals  # the counter ledger as committed with this report
    inst_names: tuple[str, ...]
    inst_values: tuple[str, ...]
    k8s: bool
    pods: PodMap
    cores_per_device: int
    core_device_label: bool = True  # False (--core-labels aws): per-core series carry AWS's label set exactly

    @property
    def runtime_names(self) -> tuple[str, ...]:
        return (*self.inst_names, "runtime_tag", *(K8S_LABELS if self.k8s else ()))

    @property
    def core_names(self) -> tuple[str, ...]:
        if self.core_device_label:
            return (*self.runtime_names, "neuroncore", "neuron_device_index")
        return (*self.runtime_names, "neuroncore")

    def device_of(self, core: str) -> str:
        if self.cores_per_device > 0 and core.isdigit():
            return str(int(core) // self.cores_per_device)
        return ""
