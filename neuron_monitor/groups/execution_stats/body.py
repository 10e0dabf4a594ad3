"""The body of ``execution_stats``, defined once: the collector (and its compiled twin, `_native.c` ``summary``)
builds an `ExecutionStatsBody`, the spec reads these keys. ``tests/groups/test_group_bodies.py`` checks that the
constants are the TypedDicts' keys, that the data block's counter map (neuron/layout.py, below the groups) names the
same statuses and errors, and that the compiled twin writes these keys.

AWS's report spelling and key order.
"""

from __future__ import annotations

from typing import Final, TypedDict

Percentiles = dict[str, float]  # PERCENTILES -> seconds


class LatencyStats(TypedDict):
    """Nearest-rank percentiles of the latest latency of each core that executed in the period; None when none
    did."""

    total_latency: Percentiles | None
    device_latency: Percentiles | None


class _Summary(TypedDict):
    error_summary: dict[str, int]  # ERROR_TYPES -> errors in the period
    execution_summary: dict[str, int]  # STATUS_TYPES -> executions that ended so in the period
    latency_stats: LatencyStats


class ExecutionStatsBody(_Summary, total=False):
    """One application's object; a data-block group writes its own ``period`` when it knows it."""

    period: float


PERIOD: Final = "period"
ERROR_SUMMARY: Final = "error_summary"
EXECUTION_SUMMARY: Final = "execution_summary"
LATENCY_STATS: Final = "latency_stats"
TOTAL_LATENCY: Final = "total_latency"
DEVICE_LATENCY: Final = "device_latency"
LATENCY_KINDS: Final = (TOTAL_LATENCY, DEVICE_LATENCY)
PERCENTILES: Final = ("p0", "p1", "p25", "p50", "p75", "p99", "p100")
# error types (error_summary keys)
ERROR_GENERIC: Final = "generic"
ERROR_NUMERICAL: Final = "numerical"
ERROR_TRANSIENT: Final = "transient"
ERROR_MODEL: Final = "model"
ERROR_RUNTIME: Final = "runtime"
ERROR_HARDWARE: Final = "hardware"
ERROR_TYPES: Final = (ERROR_GENERIC, ERROR_NUMERICAL, ERROR_TRANSIENT, ERROR_MODEL, ERROR_RUNTIME, ERROR_HARDWARE)
# status types (execution_summary keys)
STATUS_COMPLETED: Final = "completed"
STATUS_COMPLETED_WITH_ERR: Final = "completed_with_err"
STATUS_COMPLETED_WITH_NUM_ERR: Final = "completed_with_num_err"
STATUS_TIMED_OUT: Final = "timed_out"
STATUS_INCORRECT_INPUT: Final = "incorrect_input"
STATUS_FAILED_TO_QUEUE: Final = "failed_to_queue"
STATUS_TYPES: Final = (
    STATUS_COMPLETED,
    STATUS_COMPLETED_WITH_ERR,
    STATUS_COMPLETED_WITH_NUM_ERR,
    STATUS_TIMED_OUT,
    STATUS_INCORRECT_INPUT,
    STATUS_FAILED_TO_QUEUE,
)
