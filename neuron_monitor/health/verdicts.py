"""The node's health as ``neuron-monitor-health`` shows it, from the host's files or from a running exporter.

`from_body` reads a ``neuron_device_health`` body (the group collected once, on ``--root`` or ``--simulate``);
`from_exposition` reads an exporter's /metrics text (``neuron_device_health_state``,
``neuron_device_health_reason``, ``neuron_node_health_state``). Both return a `NodeHealth`; `exit_code` maps it to
the node-problem-detector custom-plugin protocol (0 OK, 1 NonOK, 2 Unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from neuron_monitor.groups.neuron_device_health import body as K

OK, NON_OK, UNKNOWN = 0, 1, 2  # node-problem-detector's custom-plugin exit codes
MAX_DEVICES = 4096
MAX_REASONS = 64


@dataclass
class DeviceLine:
    index: str
    state: str
    reasons: list[str] = field(default_factory=list)  # "rule detail" (or "rule")
    since: float | None = None


@dataclass
class NodeHealth:
    state: str  # healthy, unhealthy, unknown
    devices: list[DeviceLine] = field(default_factory=list)
    problem: str = ""  # why the state could not be told (a source that failed), or ""


def shown(text: str, limit: int = 80) -> str:
    """``text`` safe for a terminal or a node condition: printable ASCII only, at most ``limit`` characters."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in text)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _reason_text(rule: str, detail: str) -> str:
    return shown(f"{rule} {detail}" if detail else rule, 60)


def from_body(body: dict[str, Any]) -> NodeHealth:
    """The node's health from a ``neuron_device_health`` body."""
    node = body.get(K.NODE) or {}
    devices = []
    for entry in body.get(K.NEURON_DEVICES) or []:
        health = entry.get(K.HEALTH) or {}
        reasons = [_reason_text(r.get(K.RULE, ""), r.get(K.DETAIL, "")) for r in health.get(K.REASONS) or []]
        devices.append(
            DeviceLine(str(entry.get(K.DEVICE_INDEX)), str(health.get(K.STATE)), reasons, health.get(K.SINCE))
        )
    problem = ""
    if not devices:
        problem = "no Neuron device listed (is the Neuron driver loaded?)"
    return NodeHealth(str(node.get(K.STATE, "unknown")), devices, problem)


def from_exposition(text: str) -> NodeHealth:
    """The node's health from an exporter's /metrics text; state unknown (with ``problem``) without health data."""
    states: dict[str, str] = {}
    since: dict[str, float] = {}
    reasons: dict[str, list[str]] = {}
    node_state = ""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            device = labels.get("neuron_device_index", "")
            if sample.name == "neuron_device_health_state" and sample.value == 1 and len(states) < MAX_DEVICES:
                states[device] = labels.get("state", "unknown")
            elif sample.name == "neuron_device_health_reason" and sample.value == 1:
                got = reasons.setdefault(device, [])
                if len(got) < MAX_REASONS:
                    got.append(_reason_text(labels.get("rule", ""), labels.get("detail", "")))
            elif sample.name == "neuron_device_health_state_since_timestamp_seconds":
                since[device] = sample.value
            elif sample.name == "neuron_node_health_state" and sample.value == 1:
                node_state = labels.get("state", "unknown")
    if not node_state:
        return NodeHealth("unknown", problem="the exporter serves no health data (neuron_device_health not collected)")
    devices = [
        DeviceLine(d, states[d], reasons.get(d, []), since.get(d)) for d in sorted(states, key=lambda d: (len(d), d))
    ]
    return NodeHealth(node_state, devices)


def exit_code(health: NodeHealth) -> int:
    """0 when every device is healthy, 1 when any is unhealthy, 2 when the state cannot be told."""
    if health.state == "unhealthy":
        return NON_OK
    if health.state == "healthy" and not health.problem:
        return OK
    return UNKNOWN


def summary(health: NodeHealth, limit: int = 80) -> str:
    """One line that fits a node condition's message (node-problem-detector cuts at ``max_output_length``)."""
    if health.problem and health.state != "unhealthy":
        return shown(f"unknown: {health.problem}", limit)
    bad = sorted((d for d in health.devices if d.state != "healthy"), key=lambda d: d.state != "unhealthy")
    if not bad:
        return shown(f"healthy: {len(health.devices)} Neuron devices", limit)
    parts = [f"{d.index} {d.reasons[0] if d.reasons else d.state}" for d in bad]
    return shown(f"{health.state}: neuron_device " + ", ".join(parts), limit)
