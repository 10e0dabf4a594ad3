"""Dimension sets for each scope of a report (host, runtime, NeuronCore, Neuron device, vCPU).

Two presets. ``default``: InstanceId, InstanceType (+ RuntimeTag for runtime metrics, + NeuronDevice/NeuronCore).
``container-insights``: the dimension names of AWS Container Insights' Neuron metrics (ClusterName, InstanceId,
InstanceType, NodeName, NeuronDevice, NeuronCore, and Namespace/PodName/ContainerName when the report carries
``neuron_k8s_info``), so dashboards and alarms built on Container Insights can be pointed at our namespace.
In that preset per-core and per-device metrics carry no RuntimeTag, exactly like Container Insights.
Both presets add ``UltraServer`` (``instance_info.ultraserver_id``, the CloudWatch agent's name for it) to the host
dimensions of a Trn2 UltraServer member.

A dimension whose value is empty (e.g. no instance metadata) is left out: CloudWatch rejects empty values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from neuron_monitor.exporters.cloudwatch.datum import Dims
from neuron_monitor.schema.info import InstanceInfo, K8sEntry, K8sInfo

PRESETS: tuple[str, ...] = ("default", "container-insights")
MAX_VALUE_CHARS = 1024


def _clean(value: object) -> str:
    """A dimension value CloudWatch accepts: printable ASCII, at most 1024 characters, not blank ("" = leave out:
    CloudWatch refuses a whole request for one value without a non-whitespace character, API_Dimension)."""
    text = str(value)
    if text.isspace():
        return ""
    if not text.isascii() or not text.isprintable():
        text = "".join(c if (c.isascii() and c.isprintable()) else "?" for c in text)
    return text[:MAX_VALUE_CHARS]


def _dims(*pairs: tuple[str, object]) -> Dims:
    return clean_dims(pairs)


def clean_dims(pairs: Iterable[tuple[str, object]]) -> Dims:
    """(name, value) pairs as dimensions: each value cleaned, an empty one left out."""
    return tuple((name, v) for name, raw in pairs if raw is not None and (v := _clean(raw)) != "")


@dataclass(frozen=True)
class K8sOwner:
    namespace: str
    pod: str
    container: str


def k8s_owners(info: K8sInfo | None) -> tuple[dict[str, K8sOwner], dict[str, K8sOwner]]:
    """NeuronCore index -> owner and Neuron device index -> owner, from ``neuron_k8s_info`` (empty if absent); the
    owner's container is the entry's first."""
    if info is None:
        return {}, {}

    def owners(table: dict[str, K8sEntry]) -> dict[str, K8sOwner]:
        return {
            idx: K8sOwner(e.namespace or "", e.pod_name or "", e.containers[0] if e.containers else "")
            for idx, e in table.items()
        }

    return owners(info.cores), owners(info.devices)


@dataclass(frozen=True)
class DimensionScheme:
    preset: str = "default"
    cluster_name: str = ""
    node_name: str = ""

    @property
    def container_insights(self) -> bool:
        return self.preset == "container-insights"

    def host(self, instance_info: InstanceInfo | None) -> Dims:
        info = instance_info or InstanceInfo()
        iid, itype = info.instance_id, info.instance_type
        ultraserver = info.ultraserver_id  # only on UltraServer members: no dimension elsewhere
        if self.container_insights:
            return _dims(
                ("ClusterName", self.cluster_name),
                ("InstanceId", iid),
                ("InstanceType", itype),
                ("NodeName", self.node_name),
                ("UltraServer", ultraserver),
            )
        return _dims(("InstanceId", iid), ("InstanceType", itype), ("UltraServer", ultraserver))

    def runtime(self, host: Dims, tag: object) -> Dims:
        return host + _dims(("RuntimeTag", tag))

    def _owner(self, owner: K8sOwner | None) -> Dims:
        if owner is None:
            return ()
        return _dims(("Namespace", owner.namespace), ("PodName", owner.pod), ("ContainerName", owner.container))

    def core(self, host: Dims, tag: object, device: int | None, core: str, owner: K8sOwner | None = None) -> Dims:
        base = host if self.container_insights else self.runtime(host, tag)
        return base + _dims(("NeuronDevice", device), ("NeuronCore", core)) + self._owner(owner)

    def device(self, host: Dims, device: object, owner: K8sOwner | None = None) -> Dims:
        return host + _dims(("NeuronDevice", device)) + self._owner(owner)

    def vcpu(self, host: Dims, vcpu: str) -> Dims:
        return host + _dims(("VCpu", vcpu))
