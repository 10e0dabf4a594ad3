"""Label sets shared by many series: instance labels (AWS's six), and Kubernetes pod attribution.

Instance labels come from ``instance_info`` exactly as AWS's exporter names them. Kubernetes labels come from the
report's optional top-level ``neuron_k8s_info`` object: a NeuronCore's pod is looked up by core index, and a
runtime's pod is the pod of the cores it uses (several distinct pods are joined with ",").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neuron_monitor.exporters.prometheus.values import mapping, sequence, text

# (label name, instance_info key) as AWS's exporter maps them
INSTANCE_LABEL_KEYS: tuple[tuple[str, str], ...] = (
    ("instance_name", "instance_name"),
    ("instance_id", "instance_id"),
    ("instance_type", "instance_type"),
    ("availability_zone", "instance_availability_zone"),
    ("region", "instance_region"),
    ("subnet_id", "subnet_id"),
)
# present on instance_info only (additive)
INSTANCE_INFO_EXTRA_KEYS: tuple[tuple[str, str], ...] = (
    ("availability_zone_id", "instance_availability_zone_id"),
    ("ami_id", "ami_id"),
)
# on instance_info only, when the report has ultraserver_id (additive; see neuron/ultraserver.py)
ULTRASERVER_INFO_KEYS: tuple[tuple[str, str], ...] = (
    ("ultraserver_node_id", "ultraserver_node_id"),
    ("ultraserver_node_count", "ultraserver_node_count"),
    ("ultraserver_modes", "ultraserver_modes"),
)
K8S_LABELS: tuple[str, ...] = ("pod_name", "namespace", "container_name")
_KEPT_STRINGS: dict[str, str] = {}
KEPT_STRINGS_LIMIT = 16384  # distinct label strings kept (the table starts over beyond this)
KEPT_STRING_LENGTH = 256  # longer strings are not kept
NO_POD: tuple[str, str, str] = ("", "", "")


def kept_string(value: str) -> str:
    """One object for every equal short label string, across reports. Each decoded report brings new string
    objects; the renderer and the label guard compare a family's label tuples with the previous report's, and
    tuples of the same objects compare by identity (1.6 us for a trn2.48xlarge report's 1,525 series instead of
    126 us). Bounded: at most ``KEPT_STRINGS_LIMIT`` strings of at most ``KEPT_STRING_LENGTH`` characters."""
    kept = _KEPT_STRINGS.get(value)
    if kept is not None:
        return kept
    if len(value) <= KEPT_STRING_LENGTH:
        if len(_KEPT_STRINGS) >= KEPT_STRINGS_LIMIT:
            _KEPT_STRINGS.clear()
        _KEPT_STRINGS[value] = value
    return value


def instance_labels(info: dict[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names, values) of the instance labels; ``ultraserver_id`` is added when the report carries it."""
    info = info or {}
    names = [n for n, _ in INSTANCE_LABEL_KEYS]
    values = [text(info.get(k), f"instance_info.{k}") for _, k in INSTANCE_LABEL_KEYS]
    if info.get("ultraserver_id") is not None:
        names.append("ultraserver_id")
        values.append(text(info["ultraserver_id"], "instance_info.ultraserver_id"))
    return tuple(names), tuple(map(kept_string, values))


def instance_info_extras(info: dict[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The additive ``instance_info`` labels; the UltraServer node keys only on UltraServer members."""
    info = info or {}
    keys = INSTANCE_INFO_EXTRA_KEYS
    if info.get("ultraserver_id") is not None:
        keys = keys + ULTRASERVER_INFO_KEYS
    names = tuple(n for n, _ in keys)
    values = tuple(text(info.get(k), f"instance_info.{k}") for _, k in keys)
    return names, values


class PodMap:
    """NeuronCore index -> (pod_name, namespace, container_name) from ``neuron_k8s_info``."""

    def __init__(self, k8s_info: dict[str, Any] | None) -> None:
        self.cores: dict[str, tuple[str, str, str]] = {}
        if not k8s_info:  # an error with maps present: the daemon kept the last good mapping (kubelet outage)
            return
        cores = mapping(k8s_info.get("neuroncores_k8s_info"), "neuron_k8s_info.neuroncores_k8s_info") or {}
        for idx, entry in cores.items():
            where = f"neuron_k8s_info.neuroncores_k8s_info.{idx}"
            entry = mapping(entry, where)
            if entry is None:
                continue
            raw = entry.get("container_name")
            containers = [raw] if isinstance(raw, str) else sequence(raw, f"{where}.container_name")
            self.cores[str(idx)] = (
                kept_string(text(entry.get("pod_name"), f"{where}.pod_name")),
                kept_string(text(entry.get("namespace"), f"{where}.namespace")),
                kept_string(",".join(text(c, f"{where}.container_name") for c in containers or ())),
            )

    def core(self, idx: str) -> tuple[str, str, str]:
        return self.cores.get(idx, NO_POD)

    def runtime(self, core_indexes: Iterable[str]) -> tuple[str, str, str]:
        """The pod of a runtime's cores; distinct values per field are sorted and joined with ","."""
        pods = {self.cores[i] for i in core_indexes if i in self.cores}
        if not pods:
            return NO_POD
        if len(pods) == 1:
            return next(iter(pods))
        return (
            ",".join(sorted({p[0] for p in pods})),
            ",".join(sorted({p[1] for p in pods})),
            ",".join(sorted({c for p in pods for c in p[2].split(",") if c})),
        )
