"""The body of ``neuron_device_health``, defined once: the collector builds a `NeuronDeviceHealthBody`, the spec
and the readers of a report's verdicts (neuron-monitor-taint's ``taint/engine.py``, ``health/verdicts.py``) read
these keys. ``tests/groups/test_group_bodies.py`` checks that the constants are the TypedDicts' keys, that the
states and fault kinds are the ones the rules and the fault ledger use, and that a collected body has exactly
these keys, in this order.

Our own group (AWS's neuron-monitor has none like it). Times are wall seconds (``time.time()``). The ``neuron_devices``
list and a device's index keep the names every device group shares (schema/names.py).
"""

from __future__ import annotations

from typing import Final, TypedDict

from neuron_monitor.schema import names as N


class Reason(TypedDict):
    """A finding behind a verdict (docs/health.md has the rule table)."""

    rule: str
    severity: str  # unhealthy, unknown or warning
    detail: str  # the signal's detail: a component, hbm/sram, a power status, a file
    message: str
    since: float


class Health(TypedDict):
    """A verdict: a device's (``health``); the node's (``node``) adds its counts to these keys."""

    state: str  # one of STATES
    since: float  # when the state began
    reasons: list[Reason]


class FaultEvent(TypedDict):
    """Events of one kind first counted for this report."""

    count: int
    first_seen: float


class FaultTotal(TypedDict):
    """Events of one kind counted so far (kept across restarts in the daemon's --state-dir)."""

    count: int
    first_seen: float
    last_seen: float


class DeviceHealth(TypedDict):
    """One device's entry."""

    neuron_device_index: int
    health: Health
    fault_events: dict[str, FaultEvent]  # a kind of FAULT_KINDS -> its new events (only kinds that had some)
    fault_totals: dict[str, FaultTotal]  # a kind of FAULT_KINDS -> every event counted so far


class Node(TypedDict):
    """The node's verdict and how many devices are in each state."""

    state: str
    since: float
    device_states: dict[str, int]  # every state of STATES -> devices in it
    expected_devices: int  # what the instance type has (0 when unknown)
    instance_type: str


class _Body(TypedDict):
    node: Node
    neuron_devices: list[DeviceHealth]  # every known device, in index order
    watch_interval: float  # seconds between the fast watches of the signals


class NeuronDeviceHealthBody(_Body, total=False):
    """What one collection returns (the scheduler adds ``period`` and ``fresh``); the group writes its own
    ``error`` when a source could not be read or the state could not be saved."""

    error: str


NODE: Final = "node"
NEURON_DEVICES: Final = N.NEURON_DEVICES
WATCH_INTERVAL: Final = "watch_interval"
ERROR: Final = N.ERROR
FIELDS: Final = (NODE, NEURON_DEVICES, WATCH_INTERVAL, ERROR)  # in report order
# a device's entry (DeviceHealth), in report order
DEVICE_INDEX: Final = N.NEURON_DEVICE_INDEX
HEALTH: Final = "health"
FAULT_EVENTS: Final = "fault_events"
FAULT_TOTALS: Final = "fault_totals"
DEVICE_FIELDS: Final = (DEVICE_INDEX, HEALTH, FAULT_EVENTS, FAULT_TOTALS)
# a verdict (Health; the node's Node begins with the same two)
STATE: Final = "state"
SINCE: Final = "since"
REASONS: Final = "reasons"
HEALTH_FIELDS: Final = (STATE, SINCE, REASONS)
# a reason (Reason), in report order
RULE: Final = "rule"
SEVERITY: Final = "severity"
DETAIL: Final = "detail"
MESSAGE: Final = "message"
REASON_FIELDS: Final = (RULE, SEVERITY, DETAIL, MESSAGE, SINCE)
# a fault kind's new events (FaultEvent) and totals (FaultTotal)
COUNT: Final = "count"
FIRST_SEEN: Final = "first_seen"
LAST_SEEN: Final = "last_seen"
# the node (Node), in report order
DEVICE_STATES: Final = "device_states"
EXPECTED_DEVICES: Final = "expected_devices"
INSTANCE_TYPE: Final = "instance_type"
NODE_FIELDS: Final = (STATE, SINCE, DEVICE_STATES, EXPECTED_DEVICES, INSTANCE_TYPE)
# the states (a verdict's state; device_states' keys) and the fault kinds (fault_events'/fault_totals' keys)
HEALTHY: Final = "healthy"
UNHEALTHY: Final = "unhealthy"
UNKNOWN: Final = "unknown"
STATES: Final = (HEALTHY, UNHEALTHY, UNKNOWN)
ECC_UNCORRECTED: Final = "ecc_uncorrected"
ECC_REPAIRABLE: Final = "ecc_repairable"
HW_ERROR: Final = "hw_error"
HEALTH_COMPONENT: Final = "health_component"
DEVICE_LOST: Final = "device_lost"
FAULT_KINDS: Final = (ECC_UNCORRECTED, ECC_REPAIRABLE, HW_ERROR, HEALTH_COMPONENT, DEVICE_LOST)
