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
from typing import Any

from neuron_monitor.exporters.cloudwatch.datum import Dims

PRESETS: tuple[str, ...] = ("default", "container-insights")
MAX_VALUE_CHARS = 1024


def _clean(value: object) -> str:
    """A dimension value CloudWatch accepts: printable ASCII, at most 1024 characters ("" = leave out)."""
    text = str(value)
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


def k8s_owners(report: dict[str, Any]) -> tuple[dict[str, K8sOwner], dict[str, K8sOwner]]:
    """NeuronCore index -> owner and Neuron device index -> owner, from ``neuron_k8s_info`` (empty if absent)."""
    info = report.get("neuron_k8s_info")
    if not isinstance(info, dict):
        return {}, {}

    def owners(key: str) -> dict[str, K8sOwner]:
        table = info.get(key)
        out: dict[str, K8sOwner] = {}
        if isinstance(table, dict):
            for idx, entry in table.items():
                if not isinstance(entry, dict):
                    continue
                containers = entry.get("container_name")
                first = containers[0] if isinstance(containers, list) and containers else containers
                out[str(idx)] = K8sOwner(
                    str(entry.get("namespace") or ""), str(entry.get("pod_name") or ""), str(first or "")
                )
        return out

    return owners("neuroncores_k8s_info"), owners("neurondevices_k8s_info")


@dataclass(frozen=True)
class DimensionScheme:
    preset: str = "default"
    cluster_name: str = ""
    node_name: str = ""

    @property
    def container_insights(self) -> bool:
        return self.preset == "container-insights"

    def host(self, instance_info: dict[str, Any]) -> Dims:
        iid, itype = instance_info.get("instance_id"), instance_info.get("instance_type")
        ultraserver = instance_info.get("ultraserver_id")  # only on UltraServer members: no dimension elsewhere
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
