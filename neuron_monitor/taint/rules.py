"""The DeviceTaintRule objects ``neuron-monitor-taint`` writes, and how it tells its own from anyone else's.

A rule (``resource.k8s.io/v1``, cluster scoped) selects one device by driver, pool and device name
(``spec.deviceSelector``) and carries one taint (``spec.taint``: key ``neuron.aws.com/unhealthy``, value the health
rule that fired, effect ``None``, ``NoSchedule`` or ``NoExecute``). Its name is stable for (node, device), and two
labels mark it: ``app.kubernetes.io/managed-by: neuron-monitor-taint`` and ``neuron.aws.com/taint-node: <node>``.
A rule counts as this node's only when both labels say so and its selector names the driver, a pool and a device
(`own_rule`); anything else is never changed or deleted. The admission policy in deploy/kubernetes-dra-taint checks
the same from the API server's side.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

API_GROUP = "resource.k8s.io"
API_VERSIONS = ("v1", "v1beta2")  # DeviceTaintRule: v1 from Kubernetes 1.37 (stable), v1beta2 in 1.36 (beta)
KIND = "DeviceTaintRule"
RESOURCE = "devicetaintrules"
TAINT_KEY = "neuron.aws.com/unhealthy"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "neuron-monitor-taint"
NODE_LABEL = "neuron.aws.com/taint-node"
EFFECTS = ("None", "NoSchedule", "NoExecute")
NAME_PREFIX = "neuron-monitor-"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")

DeviceKey = tuple[str, str]  # (pool, device name)


def label_value_ok(value: str) -> bool:
    """A valid Kubernetes label value (at most 63 characters, alphanumeric at both ends)."""
    return _LABEL_VALUE.fullmatch(value) is not None


def rule_name(node: str, device: str) -> str:
    """The stable object name for this node's rule on ``device``: readable when it is a valid name, else hashed."""
    name = f"{NAME_PREFIX}{node}-{device}".lower()
    if len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name):
        return name
    digest = hashlib.sha256(f"{node}\0{device}".encode()).hexdigest()[:20]
    return f"{NAME_PREFIX}{digest}"


def selector_of(node_label: str) -> str:
    """The label selector that lists this node's rules."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{NODE_LABEL}={node_label}"


def build_rule(
    node: str, driver: str, pool: str, device: str, value: str, effect: str, version: str = "v1"
) -> dict[str, Any]:
    """The DeviceTaintRule object for ``device`` of ``pool`` (the health rule ``value`` fired on it)."""
    return {
        "apiVersion": f"{API_GROUP}/{version}",
        "kind": KIND,
        "metadata": {
            "name": rule_name(node, device),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, NODE_LABEL: node},
        },
        "spec": {
            "deviceSelector": {"driver": driver, "pool": pool, "device": device},
            "taint": {"key": TAINT_KEY, "value": value, "effect": effect},
        },
    }


@dataclass(frozen=True)
class OwnRule:
    """One of this node's rules as the API server holds it."""

    name: str
    pool: str
    device: str
    value: str
    effect: str
    resource_version: str
    eviction: str = ""  # status condition EvictionInProgress: "<status>: <message>" (for None: what would happen)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object, limit: int = 253) -> str:
    return value[:limit] if isinstance(value, str) else ""


def own_rule(obj: object, node: str, driver: str) -> OwnRule | None:
    """``obj`` as this node's rule, or None when it is not one (other labels, another driver, no pool/device, another
    taint key): such a rule is never changed or deleted, whatever the server's label selector let through."""
    meta = _dict(_dict(obj).get("metadata"))
    labels = _dict(meta.get("labels"))
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY or labels.get(NODE_LABEL) != node:
        return None
    spec = _dict(_dict(obj).get("spec"))
    selector = _dict(spec.get("deviceSelector"))
    taint = _dict(spec.get("taint"))
    pool, device, name = _text(selector.get("pool")), _text(selector.get("device")), _text(meta.get("name"))
    if selector.get("driver") != driver or not pool or not device or not name or taint.get("key") != TAINT_KEY:
        return None
    return OwnRule(
        name,
        pool,
        device,
        _text(taint.get("value"), 63),
        _text(taint.get("effect"), 16),
        _text(meta.get("resourceVersion"), 64),
        _eviction(_dict(obj).get("status")),
    )


def _eviction(status: object) -> str:
    """The ``EvictionInProgress`` condition of a rule's status, as one line (empty without one)."""
    conditions = _dict(status).get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        condition = _dict(condition)
        if condition.get("type") == "EvictionInProgress":
            return f"{_text(condition.get('status'), 8)}: {_text(condition.get('message'), 300)}"
    return ""
