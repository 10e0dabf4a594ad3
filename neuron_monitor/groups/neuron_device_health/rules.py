"""The device health verdict: which driver signal makes a Neuron device healthy, unhealthy or unknown.

Pure functions over plain values (no file, no clock): `evaluate` turns one device's `DeviceSignals` into its
`Finding`s by the rule table `RULES`, `device_state` folds findings into the three-state verdict and `node_state`
folds the devices' verdicts into the node's. `track` carries each verdict's and finding's ``since`` from one
evaluation to the next. The table, each rule's public source and the reasoning behind the choices are in
docs/health.md; `tests/groups/test_neuron_device_health_rules.py` walks the table row by row.

Verdicts: ``unhealthy`` when any finding is of severity unhealthy; else ``unknown`` when any is of severity
unknown (a signal the verdict needs could not be read); else ``healthy``. A ``warning`` finding (repair pending)
is listed with a healthy verdict: the device works, the driver repairs the memory at its next reset.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from neuron_monitor.groups.neuron_device_health.body import HEALTHY as HEALTHY
from neuron_monitor.groups.neuron_device_health.body import STATES as STATES
from neuron_monitor.groups.neuron_device_health.body import UNHEALTHY as UNHEALTHY
from neuron_monitor.groups.neuron_device_health.body import UNKNOWN as UNKNOWN

WARNING: Final = "warning"  # a finding that leaves the verdict healthy

# instance type -> Neuron devices it has (AWS's instance type pages: https://aws.amazon.com/ec2/instance-types/trn1/,
# .../trn2/, .../inf1/, .../inf2/; trn3 from the Neuron SDK's Trn3 architecture page)
DEVICES_BY_INSTANCE_TYPE: Final[dict[str, int]] = {
    "inf1.xlarge": 1, "inf1.2xlarge": 1, "inf1.6xlarge": 4, "inf1.24xlarge": 16,
    "inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16,
    "trn2.3xlarge": 1, "trn2.48xlarge": 16, "trn2u.48xlarge": 16, "trn3.48xlarge": 16,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the rule table: its id (the ``rule`` of a finding), severity, and what it means."""

    id: str
    severity: str  # UNHEALTHY, UNKNOWN or WARNING
    signal: str  # the driver file (or fact) it reads
    meaning: str


R_DEVICE_LOST: Final = Rule(
    "device_lost", UNHEALTHY, "/sys/class/neuron_device listing", "the instance has the device, the driver lists none"
)
R_ECC_UNCORRECTED: Final = Rule(
    "ecc_uncorrected",
    UNHEALTHY,
    "stats/hardware/{mem,sram}_ecc_uncorrected",
    "uncorrected HBM or SRAM ECC errors since the driver loaded (data was corrupted)",
)
R_COMPONENT: Final = Rule(
    "unhealthy_component",
    UNHEALTHY,
    "stats/hardware/health_status/unhealthy_components",
    "the driver's health check lists the component as unhealthy",
)
R_HW_ERROR: Final = Rule(
    "hw_error_event",
    UNHEALTHY,
    "stats/hardware/health_status/hw_error_event",
    "the firmware raised hardware error events since the driver loaded",
)
R_REPAIR_PENDING: Final = Rule(
    "repair_pending",
    WARNING,
    "stats/hardware/mem_ecc_repairable_uncorrected",
    "uncorrected HBM errors the driver repairs at the device's next reset",
)
R_UNREACHABLE: Final = Rule(
    "device_unreachable",
    UNKNOWN,
    "stats/hardware/health_status/unhealthy_components",
    "the driver could not ask the firmware for the device's health",
)
R_UNREADABLE: Final = Rule(
    "signal_unreadable", UNKNOWN, "any health file", "a health file the driver exposes could not be read or parsed"
)
R_POWER: Final = Rule(
    "power_status", UNKNOWN, "stats/power/utilization", "the power roll-up is NO_DATA or INVALID (no fresh telemetry)"
)
R_SIGNAL_MISSING: Final = Rule(
    "signal_missing",
    UNKNOWN,
    "the expected signals of the device's architecture and driver version (EXPECTED_SIGNALS)",
    "a signal the driver exposes on this architecture and version was not found: the verdict cannot be made",
)
RULES: Final = (
    R_DEVICE_LOST,
    R_ECC_UNCORRECTED,
    R_COMPONENT,
    R_HW_ERROR,
    R_REPAIR_PENDING,
    R_UNREACHABLE,
    R_UNREADABLE,
    R_SIGNAL_MISSING,
    R_POWER,
)
DEVICE_UNREACHABLE: Final = "device_unreachable"  # what unhealthy_components holds when the firmware did not answer

# The signals a device must expose, per architecture (``info/architecture/device_name``), from driver
# `EXPECTED_FROM_DRIVER` on (docs/health.md has the table and its public sources). Earlier drivers and Inferentia
# (Inf1, dropped by driver 2.25) expose less: a signal they lack makes no finding there.
EXPECTED_FROM_DRIVER: Final = (2, 30, 2)
_ECC: Final = (
    "hardware/mem_ecc_uncorrected",
    "hardware/sram_ecc_uncorrected",
    "hardware/mem_ecc_repairable_uncorrected",
)
_HEALTH_STATUS: Final = ("health_status/unhealthy_components", "health_status/hw_error_event")
_POWER: Final = ("power/utilization",)
EXPECTED_SIGNALS: Final[dict[str, tuple[str, ...]]] = {
    "Inferentia": (),
    "Inferentia2": (*_ECC, *_POWER),
    "Trainium1": (*_ECC, *_POWER),
    "Trainium2": (*_ECC, *_HEALTH_STATUS, *_POWER),
    "Trainium3": (*_ECC, *_HEALTH_STATUS, *_POWER),
}
EXPECTED_UNNAMED: Final = (*_ECC, *_POWER)  # a device whose name cannot be read: what every supported one has


def expected_signals(device_name: str, driver: tuple[int, ...] | None) -> tuple[str, ...]:
    """The node families a device named ``device_name`` exposes under driver ``driver`` (None: unreadable, taken
    as a current driver: a daemon that cannot tell must not call a blind device healthy)."""
    if driver is not None and driver < EXPECTED_FROM_DRIVER:
        return ()
    return EXPECTED_SIGNALS.get(device_name, EXPECTED_UNNAMED)


@dataclass(frozen=True, slots=True)
class DeviceSignals:
    """What the driver says about one device now. ``None``: the driver does not expose that signal (an older
    driver or architecture), which makes no finding; ``unreadable`` names the exposed signals that failed."""

    index: int
    present: bool = True
    expected: bool = True  # the instance type has this device
    unhealthy_components: tuple[str, ...] | None = None
    hw_error_events: int | None = None  # cumulative since the driver loaded
    mem_ecc_uncorrected: int | None = None  # cumulative (16-bit) since the driver loaded
    sram_ecc_uncorrected: int | None = None
    mem_ecc_repairable: int | None = None
    power_status: str | None = None  # VALID, NO_DATA, INVALID
    unreadable: tuple[str, ...] = ()
    missing: tuple[tuple[str, str], ...] = ()  # (node family, why) of the expected signals not found


@dataclass(frozen=True, slots=True)
class Finding:
    """Why a device is not plainly healthy: the rule, the signal's detail (a component, ``hbm``/``sram``, a
    power status, a file), a one-line message, and since when (wall seconds; set by `track`)."""

    rule: str
    severity: str
    detail: str
    message: str
    since: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.detail)


def _finding(rule: Rule, detail: str, message: str) -> Finding:
    return Finding(rule.id, rule.severity, detail, message)


def evaluate(s: DeviceSignals) -> list[Finding]:
    """The findings for one device's signals, in the rule table's order (empty: healthy)."""
    if not s.present:
        if s.expected:
            return [_finding(R_DEVICE_LOST, "", f"neuron_device {s.index} is not listed by the driver")]
        return []
    out: list[Finding] = []
    for where, count in (("hbm", s.mem_ecc_uncorrected), ("sram", s.sram_ecc_uncorrected)):
        if count:
            out.append(_finding(R_ECC_UNCORRECTED, where, f"{count} uncorrected {where.upper()} ECC errors"))
    components = s.unhealthy_components or ()
    for component in components:
        if component != DEVICE_UNREACHABLE:
            out.append(_finding(R_COMPONENT, component, f"driver reports {component} unhealthy"))
    if s.hw_error_events:
        out.append(_finding(R_HW_ERROR, "", f"{s.hw_error_events} hardware error events"))
    if s.mem_ecc_repairable:
        message = f"{s.mem_ecc_repairable} repairable HBM ECC errors: repair at next device reset"
        out.append(_finding(R_REPAIR_PENDING, "hbm", message))
    if DEVICE_UNREACHABLE in components:
        out.append(_finding(R_UNREACHABLE, "", "driver could not read the device's health from its firmware"))
    for name in s.unreadable:
        out.append(_finding(R_UNREADABLE, name, f"cannot read {name}"))
    for family, why in s.missing:
        message = f"{family} not found: {why}" if why else f"{family} not found"
        out.append(_finding(R_SIGNAL_MISSING, family, message if len(message) < 80 else f"{message[:76]}..."))
    if s.power_status in ("NO_DATA", "INVALID"):
        out.append(_finding(R_POWER, s.power_status, f"power telemetry {s.power_status}"))
    return out


def device_state(findings: Iterable[Finding]) -> str:
    """unhealthy if any finding is; else unknown if any is; else healthy (warnings stay healthy)."""
    severities = {f.severity for f in findings}
    if UNHEALTHY in severities:
        return UNHEALTHY
    if UNKNOWN in severities:
        return UNKNOWN
    return HEALTHY


def node_state(states: Sequence[str]) -> str:
    """The node's verdict from its devices': unhealthy if any is, else unknown if any is or there is none."""
    if UNHEALTHY in states:
        return UNHEALTHY
    if not states or UNKNOWN in states:
        return UNKNOWN
    return HEALTHY


@dataclass(frozen=True, slots=True)
class Verdict:
    """A device's (or the node's) verdict: state, since when (wall seconds), the findings behind it."""

    state: str
    since: float
    findings: tuple[Finding, ...] = field(default_factory=tuple)


def track(previous: Verdict | None, findings: Sequence[Finding], now: float) -> Verdict:
    """The verdict for ``findings`` at ``now``: a state and each finding keep their ``since`` while they last."""
    kept = {f.key: f.since for f in previous.findings} if previous is not None else {}
    dated = tuple(replace(f, since=kept.get(f.key, now)) for f in findings)
    state = device_state(dated)
    since = previous.since if previous is not None and previous.state == state else now
    return Verdict(state, since, dated)


def expected_devices(instance_type: str) -> int | None:
    """How many Neuron devices ``instance_type`` has (None when the type is not in the table)."""
    return DEVICES_BY_INSTANCE_TYPE.get(instance_type.strip())
