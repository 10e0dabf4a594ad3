"""The body of ``vcpu_usage``, defined once: the collector (and its compiled twin, `_native.c` ``vcpu_usage``,
checked against these names by ``tests/groups/test_group_bodies.py``) builds a `VcpuUsageBody`, the spec reads
these keys.

AWS's report spelling. Shares are percent of the time that passed, rounded to 2 decimals.
"""

from __future__ import annotations

from typing import Final, TypedDict

Shares = dict[str, float]  # CPU_MODES -> percent


class VcpuUsageBody(TypedDict):
    """What one collection returns (the scheduler adds ``period``, ``error`` and ``fresh``)."""

    average_usage: Shares  # over all vCPUs (the aggregate ``cpu`` line)
    usage_data: dict[str, Shares]  # per vCPU: its number as text ("0", "1", ...) -> its shares
    context_switch_count: int  # ``ctxt`` delta over the period (a per-period count)


AVERAGE_USAGE: Final = "average_usage"
USAGE_DATA: Final = "usage_data"
CONTEXT_SWITCH_COUNT: Final = "context_switch_count"
FIELDS: Final = (AVERAGE_USAGE, USAGE_DATA, CONTEXT_SWITCH_COUNT)  # in report order

# the keys of a Shares map, in report order (/proc/stat's columns; steal counts in the total but is not printed)
CPU_USER: Final = "user"
CPU_NICE: Final = "nice"
CPU_SYSTEM: Final = "system"
CPU_IDLE: Final = "idle"
CPU_IO_WAIT: Final = "io_wait"
CPU_IRQ: Final = "irq"
CPU_SOFT_IRQ: Final = "soft_irq"
CPU_MODES: Final = (CPU_USER, CPU_NICE, CPU_SYSTEM, CPU_IDLE, CPU_IO_WAIT, CPU_IRQ, CPU_SOFT_IRQ)
