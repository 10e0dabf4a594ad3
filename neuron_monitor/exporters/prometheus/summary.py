"""What the landing page says about the host: the health verdicts and which host this is, from one report.

Read through the schema layer (``schema.read.Report``): the verdicts come from the system group whose spec reads
into ``NeuronDeviceHealth`` (whatever it is called), the host from ``instance_info``. Taken when a report is shaped,
before its typed values are let go (``snapshot.Snapshot.shaped``), so the page never keeps a report. Strings are
kept as the report has them (clipped); the page escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_monitor.groups.neuron_device_health.spec import STATES, NeuronDeviceHealth
from neuron_monitor.schema.read import Report

MAX_DEVICES = 256  # rows the page lists (a trn2.48xlarge has 16 devices, a Trn2 UltraServer node as many)
MAX_REASONS = 8
MAX_CHARS = 200
UNKNOWN = "unknown"


def _clip(text: object) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= MAX_CHARS else s[: MAX_CHARS - 3] + "..."


@dataclass(frozen=True)
class DeviceVerdict:
    device: str  # its index as the report writes it
    state: str  # healthy, unhealthy or unknown
    reasons: tuple[str, ...]  # "rule: message" (or the rule, or its detail)


@dataclass(frozen=True)
class HostSummary:
    verdicts: bool  # the report carries health verdicts at all
    node_state: str  # healthy, unhealthy or unknown ("" without verdicts)
    devices: tuple[DeviceVerdict, ...]
    more_devices: int  # devices past MAX_DEVICES, not listed
    health_error: str  # the health group's error, if any
    instance_id: str
    instance_type: str
    availability_zone: str


def _state(value: str | None) -> str:
    return value if value in STATES else UNKNOWN


def summarize(read: Report) -> HostSummary:
    health: NeuronDeviceHealth | None = None
    error = ""
    for group in read.system.values():
        value = group.data_as(NeuronDeviceHealth)
        if value is not None:
            health, error = value, group.error
            break
    devices: list[DeviceVerdict] = []
    if health is not None:
        for entry in health.devices[:MAX_DEVICES]:
            reasons = tuple(
                _clip(f"{r.rule}: {r.message or r.detail}" if (r.message or r.detail) else r.rule)
                for r in entry.reasons[:MAX_REASONS]
            )
            devices.append(DeviceVerdict(_clip(entry.label), _state(entry.state), reasons))
    node_state = ""
    if health is not None:
        node_state = _state(health.node_state)
        if health.node_state is None and devices:  # no node object: the worst device's state
            states = {d.state for d in devices}
            node_state = "unhealthy" if "unhealthy" in states else UNKNOWN if UNKNOWN in states else "healthy"
    info = read.instance_info
    return HostSummary(
        verdicts=health is not None,
        node_state=node_state,
        devices=tuple(devices),
        more_devices=max(len(health.devices) - MAX_DEVICES, 0) if health is not None else 0,
        health_error=_clip(error),
        instance_id=_clip(info.instance_id if info else ""),
        instance_type=_clip(info.instance_type if info else ""),
        availability_zone=_clip(info.instance_availability_zone if info else ""),
    )
