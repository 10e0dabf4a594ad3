"""What the hardware can count: bounds past which a data-block value is damaged or forged, never a measurement.

The runtime writes its data block from inside the workload, so every value in it is hostile input. A counter
delta above `delta_bound` (its counter's `RATES` per physical core and second over the interval, plus a burst for
counts accrued before the baseline was read) and a memory figure above `MAX_BYTES` make that runtime's group
object carry an ``error`` for the period instead of a number (docs/neuron-data.md, "Implausible values"). The
bounds are far above any real NeuronCore, so no real workload meets them:

- TIME_IN_USE is in microseconds, at most 10^6 per second; its burst is an hour (an execution accounted for at
  once when it ends).
- Execution outcomes, errors, model loads and inferences: 10^7 per second and core (an execution takes
  microseconds at the least), a burst of `BURST` seconds' worth.
- MAC_COUNT: 10^16 MACs per second and core (2 x 10^16 FLOP/s, about 100 times a real NeuronCore), a burst of
  one second's worth.
- Memory: 2^48 bytes (256 TiB) for any one figure of a runtime (host or device, per core, per model, in total);
  a Trn2 device has 96 GiB of device memory and a trn2.48xlarge 2 TiB of host memory.

Values within these bounds stay below 2^53 in every sum a report makes of them (exact as doubles, far inside the
64 bits JSON carries), so no value of a block can stop the report.
"""

from __future__ import annotations

from neuron_monitor.neuron import layout as L
from neuron_monitor.util.counters import U64_TOP, Source

MAX_BYTES = 1 << 48
BURST = 60.0  # seconds' worth of counts a first delta may carry from before its baseline
_BURSTS = {L.NC_TIME_IN_USE: 3600.0, L.NC_MAC_COUNT: 1.0}  # seconds' worth, where not BURST

_COUNT_RATE = 1e7
RATES: dict[int, float] = {
    L.NC_TIME_IN_USE: 1e6,
    **{c: _COUNT_RATE for _, c in L.EXECUTION_SUMMARY},
    **{c: _COUNT_RATE for _, c in L.ERROR_SUMMARY},
    L.NC_MODEL_LOAD_COUNT: _COUNT_RATE,
    L.NC_INFERENCE_COUNT: _COUNT_RATE,
    L.NC_MAC_COUNT: 1e16,
}

NAMES: dict[int, str] = {
    L.NC_TIME_IN_USE: "time in use (us)",
    **{c: name for name, c in L.EXECUTION_SUMMARY},
    **{c: f"{name} errors" for name, c in L.ERROR_SUMMARY},
    L.NC_MODEL_LOAD_COUNT: "model loads",
    L.NC_INFERENCE_COUNT: "inferences",
    L.NC_MAC_COUNT: "MAC count",
}


def limits(counter: int) -> tuple[float, float]:
    """(rate per second, burst) of NC counter ``counter``: a delta over ``dt`` seconds is implausible above
    ``rate * dt + burst``."""
    rate = RATES.get(counter, _COUNT_RATE)
    return rate, rate * _BURSTS.get(counter, BURST)


def delta_bound(counter: int, dt: float) -> float:
    """The largest change of NC counter ``counter`` one physical core can make in ``dt`` seconds."""
    rate, burst = limits(counter)
    return rate * dt + burst


def implausible_delta(device: int, core: int, counter: int, delta: int, dt: float) -> str:
    """The error text for a delta past `delta_bound`."""
    what = NAMES.get(counter, f"NC counter {counter}")
    return (
        f"neuron{device} core {core}: {what} grew by {delta} in {dt:.3f} s, more than the hardware can count "
        f"(at most {delta_bound(counter, dt):.3g}): the data block is damaged or forged; this period's counts "
        "are left out"
    )


def nc_source(counter: int) -> Source:
    """NC counter ``counter`` of a data block as util/counters.py's rule reads it: its rate and burst (`limits`),
    no value in the top half of 64 bits, except the MAC count, which a real core can take there in days (at
    4 x 10^13 MACs a second, 2^63 is 2.5 days away) and which may wrap at 2^64."""
    rate, burst = limits(counter)
    if counter == L.NC_MAC_COUNT:
        return Source(rate=rate, burst=burst, top=U64_TOP, width=64)
    return Source(rate=rate, burst=burst)


# -- the driver's cumulative sysfs counters, as util/counters.py's rule reads them -------------------------------
# ECC counts (neuron_sysfs_metrics.c, neuron_fw_io.c): sram_ecc_uncorrected is the low 16 bits of one firmware
# register, the corrected counts (driver 2.30.2) the high 16 bits of one; mem_ecc_uncorrected and its repairable
# twin are the sum of the low 16 bits of one register per HBM channel (at most MAX_DRAM_CHANNELS = 4), gated on
# v3 by the HBM repair state. The driver prints 0 when the firmware read fails (or returns 0xdeadbeef).
ECC_FIELD = Source(top=0xFFFF, width=16, zero_on_failure=True)
ECC_SUM = Source(top=4 * 0xFFFF, zero_on_failure=True)
ECC_SOURCES: dict[str, Source] = {
    "mem_ecc_corrected": ECC_FIELD,
    "sram_ecc_corrected": ECC_FIELD,
    "sram_ecc_uncorrected": ECC_FIELD,
    "mem_ecc_uncorrected": ECC_SUM,
    "mem_ecc_repairable_uncorrected": ECC_SUM,
}
# the driver's per-core counters (neuron_coreK/stats): executions by outcome and busy time (us), 64-bit
CORE_STATUS = Source(rate=_COUNT_RATE, burst=_COUNT_RATE * BURST)
CORE_BUSY_US = Source(*limits(L.NC_TIME_IN_USE))
# health_status/hw_error_event (driver 2.30.2): printed "%u", a 32-bit count of health-register changes; at most
# 10^6 a second (one a microsecond, far above any polling of the register) and a minute's worth at once
HW_ERROR_EVENTS = Source(rate=1e6, burst=6e7, top=(1 << 32) - 1, width=32)
