"""``neuron_device_telemetry`` (system): per Neuron device, what the driver exposes and no runtime reports.

Power (status, roll-up time, min/max/avg percent of the device's maximum, VALID rolls-ups only), health
(unhealthy components; driver >= 2.30.2), repairable uncorrected HBM ECC events over the period, device memory by
category (per device and per NeuronCore, bytes now and peak), host memory by category, and per NeuronCore the
busy ratio over the period (every process on the core, driver >= 2.30.2) and execution status counts over the
period. Its ``error`` may be partial: it names what the driver does not expose, the rest is reported beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from neuron_monitor.groups.neuron_device_telemetry import body as B
from neuron_monitor.groups.neuron_hw_counters.spec import CW_EVENT, FAM_ECC
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems, entries, indexed, mapping, number, sequence

# ---- the body's keys are in body.py; what the reader adds -------------------------------------------------------
NAME: Final = "neuron_device_telemetry"
POWER_STATUSES: Final = ("VALID", "NO_DATA", "INVALID")
STATS: Final = {B.MIN: "min", B.MAX: "max", B.AVG: "avg"}


@dataclass(slots=True)
class CoreTelemetry:
    busy_ratio: float | None = None
    memory_used: dict[str, float] = field(default_factory=dict)
    memory_peak: dict[str, float] = field(default_factory=dict)
    status: dict[str, float] = field(default_factory=dict)  # per-period counts


@dataclass(slots=True)
class DeviceTelemetry:
    label: str
    index: int | None
    power_status: str | None = None
    power_time: float | None = None
    power: dict[str, float] = field(default_factory=dict)  # min/max/avg -> percent
    healthy: bool | None = None  # None: not exposed
    unhealthy: list[str] = field(default_factory=list)
    ecc: dict[str, float] = field(default_factory=dict)  # per-period counts
    memory_used: dict[str, float] = field(default_factory=dict)
    memory_peak: dict[str, float] = field(default_factory=dict)
    host_used: dict[str, float] = field(default_factory=dict)
    cores: dict[str, CoreTelemetry] = field(default_factory=dict)


@dataclass(slots=True)
class NeuronDeviceTelemetry:
    devices: list[DeviceTelemetry]


def _memory(obj: Any, problems: Problems, where: str) -> tuple[dict[str, float], dict[str, float]]:
    used: dict[str, float] = {}
    peak: dict[str, float] = {}
    for cat, values in (mapping(obj, problems, where, "") or {}).items():
        values = mapping(values, problems, where, cat) or {}
        for key, out in ((B.USED, used), (B.PEAK, peak)):
            value = values.get(key)
            if value is None:
                continue
            if value.__class__ is int or value.__class__ is float:  # the common case, without building `where`
                out[cat] = float(value)
                continue
            v = number(value, problems, f"{where}.{cat}", key)
            if v is not None:
                out[cat] = v
    return used, peak


def _counts(obj: Any, problems: Problems, where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in (mapping(obj, problems, where, "", counted=True) or {}).items():
        v = number(value, problems, where, key, counted=True)
        if v is not None:
            out[key] = v
    return out


def _device(raw: Any, problems: Problems, where: str) -> DeviceTelemetry:
    d, label, device_index = indexed(raw, problems, where, B.DEVICE_INDEX)
    dev = DeviceTelemetry(label, device_index)
    power = mapping(d.get(B.POWER), problems, where, B.POWER)
    if power:
        status = power.get(B.STATUS)
        dev.power_status = status if status in POWER_STATUSES else None
        if power.get(B.SAMPLE_TIME) is not None:
            dev.power_time = number(power[B.SAMPLE_TIME], problems, f"{where}.{B.POWER}", B.SAMPLE_TIME)
        for key in STATS:
            if power.get(key) is not None:
                v = number(power[key], problems, f"{where}.{B.POWER}", key)
                if v is not None:
                    dev.power[STATS[key]] = v
    if d.get(B.HEALTHY) is not None:
        dev.healthy = bool(d[B.HEALTHY]) if isinstance(d[B.HEALTHY], bool) else None
        comps = sequence(d.get(B.UNHEALTHY_COMPONENTS), problems, where, B.UNHEALTHY_COMPONENTS) or []
        dev.unhealthy = [c for c in comps if isinstance(c, str)]
    if d.get(B.ECC) is not None:
        dev.ecc = _counts(d[B.ECC], problems, f"{where}.{B.ECC}")
    if d.get(B.DEVICE_MEMORY) is not None:
        dev.memory_used, dev.memory_peak = _memory(d[B.DEVICE_MEMORY], problems, f"{where}.{B.DEVICE_MEMORY}")
    if d.get(B.HOST_MEMORY) is not None:
        dev.host_used, _ = _memory(d[B.HOST_MEMORY], problems, f"{where}.{B.HOST_MEMORY}")
    for core, c in (mapping(d.get(B.NEURONCORES), problems, where, B.NEURONCORES) or {}).items():
        cwhere = f"{where}.{B.NEURONCORES}.{core}"
        c = mapping(c, problems, f"{where}.{B.NEURONCORES}", core) or {}
        tele = dev.cores[core] = CoreTelemetry()
        if c.get(B.BUSY_RATIO) is not None:
            tele.busy_ratio = number(c[B.BUSY_RATIO], problems, cwhere, B.BUSY_RATIO)
        if c.get(B.DEVICE_MEMORY) is not None:
            tele.memory_used, tele.memory_peak = _memory(c[B.DEVICE_MEMORY], problems, f"{cwhere}.{B.DEVICE_MEMORY}")
        if c.get(B.EXECUTION_STATUS) is not None:
            tele.status = _counts(c[B.EXECUTION_STATUS], problems, f"{cwhere}.{B.EXECUTION_STATUS}")
    return dev


def read(body: dict[str, Any], where: str, problems: Problems) -> NeuronDeviceTelemetry:
    return NeuronDeviceTelemetry(entries(body, B.NEURON_DEVICES, problems, where, _device))


# ---- Prometheus -----------------------------------------------------------------------------------------------
_DEV = ("neuron_device_index",)
FAM_POWER = S.PromFamily(
    "neuron_device_power_utilization_ratio",
    S.GAUGE,
    "Power draw of the Neuron device as a share of its maximum over the driver's last one-minute roll-up",
    S.INSTANCE_SCOPE,
    (*_DEV, "stat"),
    budget=S.only("stat", "avg"),  # the dashboard's; min and max are detail
)
FAM_POWER_STATUS = S.PromFamily(
    "neuron_device_power_status",
    S.GAUGE,
    "Status of the device's last power roll-up (1 for the current status: VALID, NO_DATA or INVALID)",
    S.INSTANCE_SCOPE,
    (*_DEV, "status"),
    budget=S.DETAIL,  # without a valid roll-up the power series are absent
)
FAM_HEALTHY = S.PromFamily(
    "neuron_device_healthy",
    S.GAUGE,
    "1 when the driver reports no unhealthy component",
    S.INSTANCE_SCOPE,
    _DEV,
    # the health verdict (neuron_device_health_state) carries the driver's flag as its unhealthy_component rule, and
    # neuron_device_unhealthy_component names the component: rules and dashboards read those (docs/fleet.md)
    budget=S.DETAIL,
)
FAM_UNHEALTHY = S.PromFamily(
    "neuron_device_unhealthy_component",
    S.GAUGE,
    "1 for each component the driver reports unhealthy",
    S.INSTANCE_SCOPE,
    (*_DEV, "component"),
)
FAM_MEM = S.PromFamily(
    "neuron_device_memory_used_bytes",
    S.GAUGE,
    "Device memory allocated on the Neuron device by category (all processes and the driver)",
    S.INSTANCE_SCOPE,
    (*_DEV, "category"),
    budget=S.NONZERO,  # a category that never held memory on the device adds nothing to a sum
)
FAM_MEM_PEAK = S.PromFamily(
    "neuron_device_memory_peak_bytes",
    S.GAUGE,
    "High-water mark of device memory on the Neuron device by category",
    S.INSTANCE_SCOPE,
    (*_DEV, "category"),
    budget=S.DETAIL,
)
FAM_HOST = S.PromFamily(
    "neuron_host_memory_used_bytes",
    S.GAUGE,
    "Host memory the driver allocated for the Neuron device by category",
    S.INSTANCE_SCOPE,
    (*_DEV, "category"),
    budget=S.DETAIL,
)
FAM_BUSY = S.PromFamily(
    "neuroncore_busy_ratio",
    S.GAUGE,
    "Share of the period the NeuronCore was busy, by the device's own count (every process on the core)",
    S.INSTANCE_SCOPE,
    ("neuroncore", *_DEV),
)
FAM_STATUS = S.PromFamily(
    "neuroncore_device_executions",
    S.COUNTER,
    "Executions on the NeuronCore by outcome, by the device's own count (every process on the core)",
    S.INSTANCE_SCOPE,
    ("neuroncore", *_DEV, "status"),
    drops_unlisted=False,
    budget=S.DETAIL,  # per core and outcome; execution_status_total (per runtime) and neuroncore_busy_ratio stay
)


def gauges(value: NeuronDeviceTelemetry) -> Iterator[S.PromSample]:
    healthy: dict[str, float] = {}
    busy: dict[str, dict[str, float]] = {}
    for dev in value.devices:
        key = (dev.label,)
        if dev.power:
            yield S.PromSample(FAM_POWER, key, dev.power, 100.0, ())
        if dev.power_status is not None:
            yield S.PromSample(
                FAM_POWER_STATUS, key, {s: float(s == dev.power_status) for s in POWER_STATUSES}, 1.0, ()
            )
        if dev.healthy is not None:
            healthy[dev.label] = 1.0 if dev.healthy else 0.0
            if dev.unhealthy:
                yield S.PromSample(FAM_UNHEALTHY, key, dict.fromkeys(dev.unhealthy, 1.0), 1.0, ())
        if dev.memory_used:
            yield S.PromSample(FAM_MEM, key, dev.memory_used, 1.0, ())
        if dev.memory_peak:
            yield S.PromSample(FAM_MEM_PEAK, key, dev.memory_peak, 1.0, ())
        if dev.host_used:
            yield S.PromSample(FAM_HOST, key, dev.host_used, 1.0, ())
        for core, tele in dev.cores.items():
            if tele.busy_ratio is not None:
                busy.setdefault(dev.label, {})[core] = tele.busy_ratio
    if healthy:
        yield S.PromSample(FAM_HEALTHY, (), healthy, 1.0, ())
    for label, cores in busy.items():
        yield S.PromSample(FAM_BUSY, (), cores, 1.0, (label,))


def counts(value: NeuronDeviceTelemetry, period: float) -> Iterator[S.PromCount]:
    for dev in value.devices:
        if dev.ecc:
            yield S.PromCount(FAM_ECC, (dev.label,), dev.ecc, 1.0)  # the family of neuron_hw_counters' ECC events
        for core, tele in dev.cores.items():
            if tele.status:
                yield S.PromCount(FAM_STATUS, (core, dev.label), tele.status, 1.0)


# ---- CloudWatch -----------------------------------------------------------------------------------------------
CW_POWER = S.CwMetric("NeuronDevicePowerUtilization", S.PERCENT, S.DEVICE_DIMS, keyed=True, additive=False)
CW_HEALTHY = S.CwMetric("NeuronDeviceHealthy", "None", S.DEVICE_DIMS, additive=False)
CW_UNHEALTHY = S.CwMetric("NeuronDeviceUnhealthy", "None", S.DEVICE_DIMS, keyed=True, additive=False)
CW_MEM = S.CwMetric("NeuronDeviceMemoryUsed", S.BYTES, S.DEVICE_DIMS, keyed=True, additive=False)
CW_MEM_PEAK = S.CwMetric("NeuronDeviceMemoryPeak", S.BYTES, S.DEVICE_DIMS, keyed=True, additive=False)
CW_HOST = S.CwMetric("NeuronHostMemoryUsed", S.BYTES, S.DEVICE_DIMS, keyed=True, additive=False)
CW_BUSY = S.CwMetric("NeuronCoreBusy", S.PERCENT, S.CORE_DIMS, additive=False)


def datums(value: NeuronDeviceTelemetry, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for dev in value.devices:
        if dev.index is None:
            continue
        key = (str(dev.index),)
        for stat, percent in dev.power.items():
            yield CW_POWER, key, stat, percent
        if dev.healthy is not None:
            yield CW_HEALTHY, key, "", 1.0 if dev.healthy else 0.0
            for component in dev.unhealthy:
                yield CW_UNHEALTHY, key, component, 1.0
        for event, count in dev.ecc.items():
            yield CW_EVENT, key, event, count
        for cat, used in dev.memory_used.items():
            yield CW_MEM, key, cat, used
        for cat, peak in dev.memory_peak.items():
            yield CW_MEM_PEAK, key, cat, peak
        for cat, used in dev.host_used.items():
            yield CW_HOST, key, cat, used
        for core, tele in dev.cores.items():
            if tele.busy_ratio is not None:
                yield CW_BUSY, (core,), "", tele.busy_ratio * 100.0


# ---- the timeline ---------------------------------------------------------------------------------------------
TRACK_POWER = S.Track("power", "power", "percent", S.DEVICE_TRACK)
TRACK_BUSY = S.Track("busy", "busy", "ratio", S.CORE_TRACK)
# what neuron-monitor-det reads: the unhealthy components (1 each; "none": 0 when healthy) and the repairable ECC
# events of each fresh period
TRACK_HEALTH = S.Track("unhealthy components", "device_health", "components", S.DEVICE_TRACK)
TRACK_REPAIRABLE = S.Track("repairable ECC", "ecc_repairable", "events", S.DEVICE_TRACK)
# the problems neuron-monitor-det reports from them (no slices in the trace: the tracks above show them)
DEVICE_UNHEALTHY: Final = "device_unhealthy"
ECC_REPAIRABLE: Final = "ecc_repairable_uncorrected"
DET_REPAIRABLE = S.DetRule(
    ECC_REPAIRABLE,
    S.DEVICE_TRACK,
    S.WARNING,
    "repairable uncorrected HBM ECC errors: the device repairs them at its next reset; plan one",
    span=S.SINCE_LAST_REPORT,
    trace_slices=False,
)
DET_UNHEALTHY = S.DetRule(
    DEVICE_UNHEALTHY,
    S.DEVICE_TRACK,
    S.ERROR,
    "the driver reports components of the Neuron device unhealthy",
    episode=S.STATE_EPISODES,
    trace_slices=False,
)


def timeline(value: NeuronDeviceTelemetry) -> Iterator[S.TimelineSample]:
    for dev in value.devices:
        if dev.index is None:
            continue
        if dev.power:
            yield TRACK_POWER, (str(dev.index),), dev.power
        if dev.healthy is not None:
            yield TRACK_HEALTH, (str(dev.index),), dict.fromkeys(dev.unhealthy, 1.0) or {"none": 0.0}
        if B.REPAIRABLE_ECC in dev.ecc:
            yield TRACK_REPAIRABLE, (str(dev.index),), {B.REPAIRABLE_ECC: dev.ecc[B.REPAIRABLE_ECC]}
        for core, tele in dev.cores.items():
            if tele.busy_ratio is not None:
                yield TRACK_BUSY, (core,), {"busy": tele.busy_ratio}


def findings(value: NeuronDeviceTelemetry) -> Iterator[S.DetFinding]:
    """Per device: its unhealthy components (when health is exposed), its repairable ECC events of the period."""
    for dev in value.devices:
        if dev.index is None:
            continue
        key = (str(dev.index),)
        if dev.healthy is not None:
            components = sorted(set(dev.unhealthy))
            yield DET_UNHEALTHY, key, len(components), {"components": components}
        if B.REPAIRABLE_ECC in dev.ecc:
            yield DET_REPAIRABLE, key, int(dev.ecc[B.REPAIRABLE_ECC]), {}


# ---- neuron-monitor-top: power and health per device ---------------------------------------------------------
COL_POWER = S.TopColumn(S.TOP_DEVICES, "power", 8, order=20, gap=2)
COL_HEALTH = S.TopColumn(S.TOP_DEVICES, "health", 12, order=30, align="<")


def top(value: NeuronDeviceTelemetry, period: float | None) -> Iterator[S.TopCell]:
    """Average power (or the roll-up's status when it is not VALID), and health."""
    for dev in value.devices:
        if dev.index is None:
            continue
        key = (str(dev.index),)
        avg = dev.power.get("avg")
        if avg is not None and dev.power_status in (None, "VALID"):
            yield COL_POWER, key, f"{avg:.0f}%", ""
        else:
            yield COL_POWER, key, (dev.power_status or "-").lower(), "yellow"
        if dev.healthy is None:
            yield COL_HEALTH, key, "-", "dim"
        elif not dev.unhealthy:
            yield COL_HEALTH, key, "ok", "green"
        else:
            text = "UNHEALTHY " + ",".join(dev.unhealthy)
            yield COL_HEALTH, key, text if len(text) <= 40 else text[:39] + "…", "bold red"


def top_device_power(value: NeuronDeviceTelemetry) -> dict[int, float]:
    """neuron-monitor-top's power history: device index -> average power (percent), from a valid roll-up only."""
    out: dict[int, float] = {}
    for dev in value.devices:
        avg = dev.power.get("avg")
        if dev.index is not None and avg is not None and dev.power_status in (None, "VALID"):
            out[dev.index] = avg
    return out


def top_device_details(value: NeuronDeviceTelemetry) -> dict[int, list[str]]:
    """neuron-monitor-top's selected device: the driver's health flag and every unhealthy component."""
    out: dict[int, list[str]] = {}
    for dev in value.devices:
        if dev.index is None or dev.healthy is None:
            continue
        if dev.healthy and not dev.unhealthy:
            out[dev.index] = ["driver health: ok"]
        else:
            out[dev.index] = ["driver health: UNHEALTHY", *(f"unhealthy component {c}" for c in dev.unhealthy)]
    return out


SPEC = S.GroupSpec(
    name=NAME,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    partial_errors=True,
    prometheus=(
        FAM_POWER,
        FAM_POWER_STATUS,
        FAM_HEALTHY,
        FAM_UNHEALTHY,
        FAM_MEM,
        FAM_MEM_PEAK,
        FAM_HOST,
        FAM_BUSY,
        FAM_STATUS,
    ),
    gauges=gauges,
    counts=counts,
    cloudwatch=(CW_POWER, CW_HEALTHY, CW_UNHEALTHY, CW_MEM, CW_MEM_PEAK, CW_HOST, CW_BUSY),
    datums=datums,
    tracks=(TRACK_POWER, TRACK_BUSY, TRACK_HEALTH, TRACK_REPAIRABLE),
    timeline=timeline,
    det_rules=(DET_REPAIRABLE, DET_UNHEALTHY),
    findings=findings,
    top_columns=(COL_POWER, COL_HEALTH),
    top=top,
    top_device_power=top_device_power,
    top_device_details=top_device_details,
)
