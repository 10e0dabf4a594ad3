"""The body of ``neuron_hw_counters``, defined once: the collector builds a `NeuronHwCountersBody`, the spec reads
these keys. ``tests/groups/test_group_bodies.py`` checks that the constants are the TypedDicts' keys, that the
driver's node map (neuron/nodes.py, below the groups) knows a file for each counter, and that a collected body has
exactly these keys.

AWS's report spelling and key order. The counts are ECC events over the period (whole numbers). A counter the
group could not read is left out of its device's entry (never 0) and named in ``error``. The ``neuron_devices``
list and a device's index keep the names every device group shares (schema/names.py).
"""

from __future__ import annotations

from typing import Final, TypedDict

from neuron_monitor.schema import names as N


class _Device(TypedDict):
    neuron_device_index: int


class DeviceEcc(_Device, total=False):
    """One device's entry: its index, then each counter that was read."""

    mem_ecc_corrected: int  # HBM errors the ECC corrected
    mem_ecc_uncorrected: int  # HBM errors it could not correct
    sram_ecc_uncorrected: int
    sram_ecc_corrected: int


class _Devices(TypedDict):
    neuron_devices: list[DeviceEcc]  # every listed device, in index order


class NeuronHwCountersBody(_Devices, total=False):
    """What one collection returns (the scheduler adds ``period`` and ``fresh``). The group writes its own
    ``error`` when some counters could not be read: a partial error, the others still reported beside it."""

    error: str


NEURON_DEVICES: Final = N.NEURON_DEVICES
NEURON_DEVICE_INDEX: Final = N.NEURON_DEVICE_INDEX
ERROR: Final = N.ERROR
# the counters, in report order (a device's entry: its index, then these)
MEM_ECC_CORRECTED: Final = "mem_ecc_corrected"
MEM_ECC_UNCORRECTED: Final = "mem_ecc_uncorrected"
SRAM_ECC_UNCORRECTED: Final = "sram_ecc_uncorrected"
SRAM_ECC_CORRECTED: Final = "sram_ecc_corrected"
COUNTERS: Final = (MEM_ECC_CORRECTED, MEM_ECC_UNCORRECTED, SRAM_ECC_UNCORRECTED, SRAM_ECC_CORRECTED)
