"""Label sets shared by many series: instance labels (AWS's six), and Kubernetes pod attribution.

Instance labels come from ``instance_info`` exactly as AWS's exporter names them. Kubernetes labels come from the
report's optional top-level ``neuron_k8s_info`` object: a NeuronCore's pod is looked up by core index, and a
runtime's pod is the pod of the cores it uses (several distinct pods are joined with ","). Cores held through a
DRA claim add ``dra_claim_name`` and ``dra_claim_namespace`` (``DRA_LABELS``): by default (``auto``) only when
the report has at least one such entry, so the exposition of a node without DRA claims is unchanged; an empty
label is no label to Prometheus, so the series of a pod keep their identity when the labels appear.
"""

from __future__ import annotations

from collections.abc import Iterable

from neuron_monitor.schema.info import InstanceInfo, K8sInfo

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
DRA_LABELS: tuple[str, ...] = ("dra_claim_name", "dra_claim_namespace")
DRA_LABEL_MODES: tuple[str, ...] = ("auto", "on", "off")
_KEPT_STRINGS: dict[str, str] = {}
_NO_INSTANCE = InstanceInfo()
KEPT_STRINGS_LIMIT = 16384  # distinct label strings kept (the table starts over beyond this)
KEPT_STRING_LENGTH = 256  # longer strings are not kept
NO_POD: tuple[str, ...] = ("", "", "")
NO_POD_DRA: tuple[str, ...] = ("", "", "", "", "")


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


def instance_labels(info: InstanceInfo | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(names, values) of the instance labels; ``ultraserver_id`` is added when the report carries it."""
    info = info or _NO_INSTANCE
    names = [n for n, _ in INSTANCE_LABEL_KEYS]
    values = [info.get(k) or "" for _, k in INSTANCE_LABEL_KEYS]
    if info.ultraserver_id is not None:
        names.append("ultraserver_id")
        values.append(info.ultraserver_id)
    return tuple(names), tuple(map(kept_string, values))


def instance_info_extras(info: InstanceInfo | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The additive ``instance_info`` labels; the UltraServer node keys only on UltraServer members."""
    info = info or _NO_INSTANCE
    keys = INSTANCE_INFO_EXTRA_KEYS
    if info.ultraserver_id is not None:
        keys = keys + ULTRASERVER_INFO_KEYS
    names = tuple(n for n, _ in keys)
    values = tuple(info.get(k) or "" for _, k in keys)
    return names, values


class PodMap:
    """NeuronCore index -> (pod_name, namespace, container_name[, dra_claim_name, dra_claim_namespace]) from
    ``neuron_k8s_info``; ``names`` are the label names, ``none`` the values for a core no pod holds.

    ``dra``: ``auto`` adds the claim labels when some entry has a ``claim_name``, ``on`` always, ``off`` never."""

    def __init__(self, k8s_info: K8sInfo | None, dra: str = "auto") -> None:
        self.cores: dict[str, tuple[str, ...]] = {}
        self.dra = dra == "on"
        if k8s_info is not None:  # an error with maps present: the daemon kept the last good mapping (kubelet outage)
            cores = k8s_info.cores
            if dra == "auto":
                self.dra = any(e.claim_name for e in cores.values())
            for idx, entry in cores.items():
                pod: tuple[str, ...] = (
                    kept_string(entry.pod_name or ""),
                    kept_string(entry.namespace or ""),
                    kept_string(",".join(entry.containers)),
                )
                if self.dra:
                    pod += (kept_string(entry.claim_name or ""), kept_string(entry.claim_namespace or ""))
                self.cores[idx] = pod
        self.names: tuple[str, ...] = K8S_LABELS + DRA_LABELS if self.dra else K8S_LABELS
        self.none: tuple[str, ...] = NO_POD_DRA if self.dra else NO_POD

    def core(self, idx: str) -> tuple[str, ...]:
        return self.cores.get(idx, self.none)

    def runtime(self, core_indexes: Iterable[str]) -> tuple[str, ...]:
        """The pod of a runtime's cores; distinct values per field are sorted and joined with ","."""
        pods = {self.cores[i] for i in core_indexes if i in self.cores}
        if not pods:
            return self.none
        if len(pods) == 1:
            return next(iter(pods))
        return tuple(
            ",".join(sorted({part for p in pods for part in p[field].split(",") if part}))
            if field == 2
            else ",".join(sorted({p[field] for p in pods if p[field] or field < 3}))  # no empty claim joined
            for field in range(len(self.none))
        )
