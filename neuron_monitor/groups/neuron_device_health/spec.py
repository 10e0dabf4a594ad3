"""``neuron_device_health`` (system): the health verdict of each Neuron device and of the node, and fault events.

Per device a ``health`` object (``state``: healthy, unhealthy or unknown; ``since``: wall seconds the state began;
``reasons``: the findings behind it, each with ``rule``, ``severity``, ``detail``, ``message`` and ``since``), the
fault events first counted for this report (``fault_events``: kind -> count and ``first_seen``) and every event
counted so far (``fault_totals``: kind -> count, ``first_seen``, ``last_seen``). The ``node`` object holds the
node's verdict and the count of devices per state. The daemon watches the signals every ``watch_interval``
seconds and writes a report as soon as a verdict changes (docs/health.md has the rule table and its sources).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from neuron_monitor.groups.neuron_device_health import body as B
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems, entries, indexed, mapping, number, sequence, text

# ---- the body's keys are in body.py -------------------------------------------------------------------------
NAME: Final = "neuron_device_health"


@dataclass(slots=True)
class Reason:
    rule: str
    severity: str
    detail: str
    message: str
    since: float | None


@dataclass(slots=True)
class DeviceHealth:
    label: str
    index: int | None
    state: str | None = None  # None: not a known state
    since: float | None = None
    reasons: list[Reason] = field(default_factory=list)
    events: dict[str, float] = field(default_factory=dict)  # kind -> events first counted in this report
    first_seen: dict[str, float] = field(default_factory=dict)  # kind -> when this report's first one was seen
    totals: dict[str, float] = field(default_factory=dict)  # kind -> events counted so far


@dataclass(slots=True)
class NeuronDeviceHealth:
    devices: list[DeviceHealth]
    node_state: str | None = None
    node_since: float | None = None
    watch_interval: float | None = None


def _reason(raw: Any, problems: Problems, where: str) -> Reason | None:
    r = mapping(raw, problems, where, "")
    if r is None:
        return None
    since = number(r[B.SINCE], problems, where, B.SINCE) if r.get(B.SINCE) is not None else None
    return Reason(
        text(r.get(B.RULE), problems, where, B.RULE),
        text(r.get(B.SEVERITY), problems, where, B.SEVERITY),
        text(r.get(B.DETAIL, ""), problems, where, B.DETAIL),
        text(r.get(B.MESSAGE, ""), problems, where, B.MESSAGE),
        since,
    )


def _state(obj: dict[str, Any], problems: Problems, where: str) -> tuple[str | None, float | None]:
    """A verdict's ``state`` (None unless a known one) and ``since``."""
    state = obj.get(B.STATE)
    return state if state in B.STATES else None, number(obj.get(B.SINCE), problems, where, B.SINCE)


def _device(raw: Any, problems: Problems, where: str) -> DeviceHealth:
    d, label, device_index = indexed(raw, problems, where, B.DEVICE_INDEX)
    dev = DeviceHealth(label, device_index)
    health = mapping(d.get(B.HEALTH), problems, where, B.HEALTH)
    if health:
        dev.state, dev.since = _state(health, problems, f"{where}.{B.HEALTH}")
        for i, r in enumerate(sequence(health.get(B.REASONS), problems, f"{where}.{B.HEALTH}", B.REASONS) or ()):
            reason = _reason(r, problems, f"{where}.{B.HEALTH}.{B.REASONS}[{i}]")
            if reason is not None:
                dev.reasons.append(reason)
    ewhere = f"{where}.{B.FAULT_EVENTS}"
    for kind, ev in (mapping(d.get(B.FAULT_EVENTS), problems, where, B.FAULT_EVENTS, counted=True) or {}).items():
        ev = mapping(ev, problems, ewhere, kind, counted=True) or {}
        count = number(ev.get(B.COUNT), problems, f"{ewhere}.{kind}", B.COUNT, counted=True)
        if count is not None:
            dev.events[kind] = count
        if ev.get(B.FIRST_SEEN) is not None:
            seen = number(ev[B.FIRST_SEEN], problems, f"{ewhere}.{kind}", B.FIRST_SEEN)
            if seen is not None:
                dev.first_seen[kind] = seen
    twhere = f"{where}.{B.FAULT_TOTALS}"
    for kind, tot in (mapping(d.get(B.FAULT_TOTALS), problems, where, B.FAULT_TOTALS) or {}).items():
        tot = mapping(tot, problems, twhere, kind) or {}
        count = number(tot.get(B.COUNT), problems, f"{twhere}.{kind}", B.COUNT)
        if count is not None:
            dev.totals[kind] = count
    return dev


def read(body: dict[str, Any], where: str, problems: Problems) -> NeuronDeviceHealth:
    value = NeuronDeviceHealth(entries(body, B.NEURON_DEVICES, problems, where, _device))
    node = mapping(body.get(B.NODE), problems, where, B.NODE)
    if node:
        value.node_state, value.node_since = _state(node, problems, f"{where}.{B.NODE}")
    if body.get(B.WATCH_INTERVAL) is not None:
        value.watch_interval = number(body[B.WATCH_INTERVAL], problems, where, B.WATCH_INTERVAL)
    return value


# ---- Prometheus -----------------------------------------------------------------------------------------------
_DEV = ("neuron_device_index",)
FAM_STATE = S.PromFamily(
    "neuron_device_health_state",
    S.GAUGE,
    "Health verdict of the Neuron device: 1 for its current state (healthy, unhealthy or unknown), 0 for the others",
    S.INSTANCE_SCOPE,
    (*_DEV, "state"),
    # OpenTelemetry's hardware conventions: hw.status, an UpDownCounter per hw.state (ok and failed are theirs;
    # unknown has no counterpart there and stays unknown)
    otel=S.OtelName(
        "hw.status",
        "1",
        labels=(("state", "hw.state"),),
        values=(("state", (("healthy", "ok"), ("unhealthy", "failed"))),),
        updown=True,
    ),
)
FAM_REASON = S.PromFamily(
    "neuron_device_health_reason",
    S.GAUGE,
    "1 for each finding behind the device's verdict: the rule, its detail (component, memory, status) and severity",
    S.INSTANCE_SCOPE,
    (*_DEV, "rule", "detail", "severity"),
)
FAM_SINCE = S.PromFamily(
    "neuron_device_health_state_since_timestamp_seconds",
    S.GAUGE,
    "When the device's current health state began (seconds since the epoch)",
    S.INSTANCE_SCOPE,
    _DEV,
    budget=S.DETAIL,  # no dashboard panel or rule reads it (the series budget, docs/fleet.md)
)
FAM_NODE = S.PromFamily(
    "neuron_node_health_state",
    S.GAUGE,
    "Health verdict of the node's Neuron devices: 1 for the current state (unhealthy if any device is, else unknown"
    " if any device is or none is listed, else healthy)",
    S.INSTANCE_SCOPE,
    ("state",),
)
FAM_FAULTS = S.PromFamily(
    "neuron_device_fault_events",
    S.COUNTER,
    "Fault events of the Neuron device by kind (ecc_uncorrected, ecc_repairable, hw_error, health_component,"
    " device_lost), each counted once",
    S.INSTANCE_SCOPE,
    (*_DEV, "kind"),
    # a kind is served from its first event on (80 zero series on a trn2.48xlarge otherwise); the dashboard's panel
    # counts a series' first appearance as its events (docs/fleet.md, the series budget)
    budget=S.NONZERO,
)


def gauges(value: NeuronDeviceHealth) -> Iterator[S.PromSample]:
    states: dict[str, dict[str, float]] = {}
    since: dict[str, float] = {}
    for dev in value.devices:
        if dev.state is None:
            continue
        states[dev.label] = {s: float(s == dev.state) for s in B.STATES}
        if dev.since is not None:
            since[dev.label] = dev.since
        for r in dev.reasons:
            yield S.PromSample(FAM_REASON, (dev.label, r.rule, r.detail), {r.severity: 1.0}, 1.0, ())
    for label, by_state in states.items():
        yield S.PromSample(FAM_STATE, (label,), by_state, 1.0, ())
    if since:
        yield S.PromSample(FAM_SINCE, (), since, 1.0, ())
    if value.node_state is not None:
        yield S.PromSample(FAM_NODE, (), {s: float(s == value.node_state) for s in B.STATES}, 1.0, ())


def counts(value: NeuronDeviceHealth, period: float) -> Iterator[S.PromCount]:
    for dev in value.devices:
        if dev.index is None:
            continue
        yield S.PromCount(FAM_FAULTS, (dev.label,), {kind: dev.events.get(kind, 0.0) for kind in B.FAULT_KINDS}, 1.0)


# ---- CloudWatch -----------------------------------------------------------------------------------------------
CW_HEALTHY = S.CwMetric("DeviceHealthy", "None", S.DEVICE_DIMS, additive=False)
CW_FAULTS = S.CwMetric("DeviceFaultEvents", S.COUNT, S.DEVICE_DIMS, keyed=True)


def datums(value: NeuronDeviceHealth, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for dev in value.devices:
        if dev.index is None:
            continue
        key = (str(dev.index),)
        if dev.state in ("healthy", "unhealthy"):  # unknown: no datum (CloudWatch's missing data)
            yield CW_HEALTHY, key, "", 1.0 if dev.state == "healthy" else 0.0
        for kind, count in dev.events.items():
            if count > 0 and kind in B.FAULT_KINDS:
                yield CW_FAULTS, key, kind, count


# ---- the timeline ---------------------------------------------------------------------------------------------
TRACK_STATE = S.Track("health", "device_health_state", "state", S.DEVICE_TRACK)
TRACK_FAULTS = S.Track("fault events", "fault_events", "events", S.DEVICE_TRACK)
STATE_LEVEL: Final = {"healthy": 0.0, "unknown": 1.0, "unhealthy": 2.0}


def timeline(value: NeuronDeviceHealth) -> Iterator[S.TimelineSample]:
    for dev in value.devices:
        if dev.index is None or dev.state is None:
            continue
        yield TRACK_STATE, (str(dev.index),), {dev.state: STATE_LEVEL[dev.state]}
        if dev.events:
            yield TRACK_FAULTS, (str(dev.index),), {k: v for k, v in dev.events.items() if k in B.FAULT_KINDS}


# ---- neuron-monitor-det: verdict transitions and fault events ------------------------------------------------
DEVICE_HEALTH_UNHEALTHY: Final = "device_health_unhealthy"
DEVICE_HEALTH_UNKNOWN: Final = "device_health_unknown"
DEVICE_FAULT_EVENTS: Final = "device_fault_events"
DET_UNHEALTHY = S.DetRule(
    DEVICE_HEALTH_UNHEALTHY,
    S.DEVICE_TRACK,
    S.ERROR,
    "the device's health verdict turned unhealthy (uncorrected ECC, an unhealthy component, hardware error"
    " events or a lost device; docs/health.md)",
    episode=S.STATE_EPISODES,
)
DET_UNKNOWN = S.DetRule(
    DEVICE_HEALTH_UNKNOWN,
    S.DEVICE_TRACK,
    S.WARNING,
    "the device's health could not be told (unreadable health files, firmware unreachable, power telemetry"
    " NO_DATA/INVALID)",
    episode=S.STATE_EPISODES,
)
DET_FAULTS = S.DetRule(
    DEVICE_FAULT_EVENTS,
    S.DEVICE_TRACK,
    S.WARNING,
    "fault events on the device (each counted once), by kind",
    trace_slices=False,
)


def _reason_names(dev: DeviceHealth, severity: str) -> list[str]:
    return [f"{r.rule} {r.detail}".strip() for r in dev.reasons if r.severity == severity]


def findings(value: NeuronDeviceHealth) -> Iterator[S.DetFinding]:
    """Per device: whether it is unhealthy or unknown now (state episodes: det reports each transition), and the
    fault events first counted in this report."""
    for dev in value.devices:
        if dev.index is None or dev.state is None:
            continue
        key = (str(dev.index),)
        bad = dev.state == "unhealthy"
        yield DET_UNHEALTHY, key, 1.0 if bad else 0.0, {"reasons": _reason_names(dev, "unhealthy") if bad else []}
        unknown = dev.state == "unknown"
        yield DET_UNKNOWN, key, 1.0 if unknown else 0.0, {"reasons": _reason_names(dev, "unknown") if unknown else []}
        events = {kind: count for kind, count in dev.events.items() if kind in B.FAULT_KINDS and count > 0}
        if events:
            yield DET_FAULTS, key, sum(events.values()), events


# ---- neuron-monitor-top: the verdict per device, coloured --------------------------------------------------------
COL_VERDICT = S.TopColumn(S.TOP_DEVICES, "verdict", 9, order=25, align="<", gap=1)
STYLES: Final = {"healthy": "green", "unknown": "yellow", "unhealthy": "bold red"}


def top(value: NeuronDeviceHealth, period: float | None) -> Iterator[S.TopCell]:
    """The device's verdict in its colour (green healthy, yellow unknown, red unhealthy) and its first finding."""
    for dev in value.devices:
        if dev.index is None:
            continue
        key = (str(dev.index),)
        if dev.state is None:
            yield COL_VERDICT, key, "-", "dim"
            continue
        first = next((f"{r.rule} {r.detail}".strip() for r in dev.reasons if r.severity != "warning"), "")
        text = dev.state.upper() if dev.state == "unhealthy" else dev.state
        if first:
            text = f"{text} {first}"
        yield COL_VERDICT, key, text if len(text) <= 40 else text[:39] + "…", STYLES[dev.state]


SIGNAL_MISSING = "signal_missing"
SIGNAL_UNREADABLE = "signal_unreadable"
# the rules by which a verdict is blind (a signal the daemon did not read), and how /readyz says each
BLIND_RULES = {SIGNAL_MISSING: "does not find", SIGNAL_UNREADABLE: "cannot read"}


def blind_signals(value: NeuronDeviceHealth) -> dict[tuple[str, str], list[int]]:
    """(rule, node family or file) -> the devices whose verdict could not be made because the daemon did not find
    it (rule ``signal_missing``) or could not read it (``signal_unreadable``): what the exporter's /readyz names."""
    out: dict[tuple[str, str], list[int]] = {}
    for dev in value.devices:
        if dev.index is None:
            continue
        for r in dev.reasons:
            if r.rule in BLIND_RULES:
                out.setdefault((r.rule, r.detail), []).append(dev.index)
    return out


def device_count(value: NeuronDeviceHealth) -> int:
    """The devices the watch lists (one entry per device it found)."""
    return len(value.devices)


def top_device_details(value: NeuronDeviceHealth) -> dict[int, list[str]]:
    """neuron-monitor-top's selected device: its verdict (and since when), then every reason: rule, detail,
    severity and message."""
    out: dict[int, list[str]] = {}
    for dev in value.devices:
        if dev.index is None or dev.state is None:
            continue
        since = f" since {time.strftime('%H:%M:%S', time.localtime(dev.since))}" if dev.since is not None else ""
        lines = [f"verdict {dev.state}{since}"]
        for r in dev.reasons:
            what = f"{r.rule} {r.detail}".strip()
            lines.append(f"{what} ({r.severity})" + (f": {r.message}" if r.message else ""))
        out[dev.index] = lines
    return out


SPEC = S.GroupSpec(
    name=NAME,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    partial_errors=True,
    prometheus=(FAM_STATE, FAM_REASON, FAM_SINCE, FAM_NODE, FAM_FAULTS),
    gauges=gauges,
    counts=counts,
    cloudwatch=(CW_HEALTHY, CW_FAULTS),
    datums=datums,
    tracks=(TRACK_STATE, TRACK_FAULTS),
    timeline=timeline,
    det_rules=(DET_UNHEALTHY, DET_UNKNOWN, DET_FAULTS),
    findings=findings,
    top_columns=(COL_VERDICT,),
    top=top,
    device_count=device_count,
    top_device_details=top_device_details,
)
