"""The body of ``neuron_device_telemetry``, defined once: the collector builds a `NeuronDeviceTelemetryBody`, the
spec reads these keys. ``tests/groups/test_group_bodies.py`` checks that the constants are the TypedDicts' keys and
that a collected body has exactly these keys, in this order.

Our own group (AWS's neuron-monitor has none like it). A device's entry holds what its driver exposed: whatever
could not be read is left out (never 0) and named in ``error``, so every member but the index is optional. The
entry's members come in the order of the TypedDicts below. The memory categories (``tensors``, ``model_code``, ...)
and the execution status counters (``completed``, ...) are the driver's directory names, listed, not fixed here.
The ``neuron_devices`` list and a device's index keep the names every device group shares (schema/names.py).
"""

from __future__ import annotations

from typing import Final, TypedDict

from neuron_monitor.schema import names as N


class _Power(TypedDict):
    status: str  # VALID, NO_DATA or INVALID
    sample_time: int  # seconds since the epoch of the roll-up


class Power(_Power, total=False):
    """The device's last power roll-up; the percentages (of the device's maximum) of a VALID one only."""

    min_percent: float
    max_percent: float
    avg_percent: float


class MemoryAmount(TypedDict, total=False):
    """One memory category: bytes now (the driver's ``total``) and the high-water mark (``peak``), each left out
    when its file is missing; a logical core's and a device's are the sums of their physical cores'."""

    used_bytes: int
    peak_bytes: int


class Ecc(TypedDict, total=False):
    mem_ecc_repairable_uncorrected: int  # events over the period


class CoreTelemetry(TypedDict, total=False):
    """One NeuronCore (logical, as the runtimes number them)."""

    device_memory: dict[str, MemoryAmount]  # category -> amounts
    execution_status: dict[str, int]  # the driver's status counter -> executions over the period
    busy_ratio: float  # 0..1 of the period (every process on the core; driver >= 2.30.2)


class _Device(TypedDict):
    neuron_device_index: int


class DeviceTelemetry(_Device, total=False):
    """One device's entry."""

    power: Power
    healthy: bool  # no unhealthy component (driver >= 2.30.2)
    unhealthy_components: list[str]
    ecc: Ecc
    host_memory: dict[str, MemoryAmount]  # category -> amounts
    device_memory: dict[str, MemoryAmount]  # category -> amounts, summed over the device's cores
    neuroncores: dict[str, CoreTelemetry]  # flat (logical) core index as text -> its telemetry


class _Devices(TypedDict):
    neuron_devices: list[DeviceTelemetry]  # every listed device, in index order


class NeuronDeviceTelemetryBody(_Devices, total=False):
    """What one collection returns (the scheduler adds ``period`` and ``fresh``). The group writes its own
    ``error`` when something could not be read: a partial error, the rest still reported beside it."""

    error: str


NEURON_DEVICES: Final = N.NEURON_DEVICES
DEVICE_INDEX: Final = N.NEURON_DEVICE_INDEX
ERROR: Final = N.ERROR
# a device's entry, in report order (DeviceTelemetry)
POWER: Final = "power"
HEALTHY: Final = "healthy"
UNHEALTHY_COMPONENTS: Final = "unhealthy_components"
ECC: Final = "ecc"
HOST_MEMORY: Final = "host_memory"
DEVICE_MEMORY: Final = "device_memory"
NEURONCORES: Final = "neuroncores"
DEVICE_FIELDS: Final = (
    DEVICE_INDEX,
    POWER,
    HEALTHY,
    UNHEALTHY_COMPONENTS,
    ECC,
    HOST_MEMORY,
    DEVICE_MEMORY,
    NEURONCORES,
)
# power (Power)
STATUS: Final = "status"
SAMPLE_TIME: Final = "sample_time"
MIN: Final = "min_percent"
MAX: Final = "max_percent"
AVG: Final = "avg_percent"
POWER_FIELDS: Final = (STATUS, SAMPLE_TIME, MIN, MAX, AVG)
# ecc (Ecc)
REPAIRABLE_ECC: Final = "mem_ecc_repairable_uncorrected"
# a memory category's amounts (MemoryAmount)
USED: Final = "used_bytes"
PEAK: Final = "peak_bytes"
# a NeuronCore's entry, in report order (CoreTelemetry)
BUSY_RATIO: Final = "busy_ratio"
EXECUTION_STATUS: Final = "execution_status"
CORE_FIELDS: Final = (DEVICE_MEMORY, EXECUTION_STATUS, BUSY_RATIO)
