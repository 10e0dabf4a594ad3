"""The body of ``neuron_runtime_vcpu_usage``, defined once: the collector (and its compiled twin, `_native.c`
``pid_usage``, checked against these names by ``tests/groups/test_group_bodies.py``) builds a
`RuntimeVcpuUsageBody`, the spec reads these keys.

AWS's report spelling. The shares are percent of **one** vCPU over the period, rounded to 2 decimals.
"""

from __future__ import annotations

from typing import Final, TypedDict


class CpuShares(TypedDict):
    """The process's CPU time over the period, percent of one vCPU."""

    user: float  # utime
    system: float  # stime


class _Usage(TypedDict):
    vcpu_usage: CpuShares


class RuntimeVcpuUsageBody(_Usage, total=False):
    """One application's object. This runtime group writes its own ``period`` (the time its shares cover: since
    the previous sample, or since the process started at first sight) and, for an application whose process is
    gone, AWS's ``error`` text with zero shares."""

    period: float
    error: str


VCPU_USAGE: Final = "vcpu_usage"
PERIOD: Final = "period"
ERROR: Final = "error"
USER: Final = "user"
SYSTEM: Final = "system"
MODES: Final = (USER, SYSTEM)  # the keys of CpuShares, in report order
