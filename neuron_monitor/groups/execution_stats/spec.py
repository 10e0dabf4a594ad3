"""``execution_stats`` (runtime): executions by status and errors by type over the period (per-period counts),
and the latency percentiles (seconds) of the period, total and on the device."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.read import Problems, mapping, numbers


@dataclass(slots=True)
class ExecutionStats:
    """The summaries, read at once (counters need them); the latency percentiles are read on first use."""

    error_summary: dict[str, float] | None  # error type -> count over the period
    execution_summary: dict[str, float] | None  # status type -> count over the period
    _latency_stats: Any
    _where: str
    _problems: Problems
    _latency: dict[str, dict[str, float]] | None = None

    def latency(self) -> dict[str, dict[str, float]]:
        """total_latency / device_latency -> percentile -> seconds (nulls left out). Read once; its wrong-typed
        values are added to the group's problems then."""
        if self._latency is None:
            latency: dict[str, dict[str, float]] = {}
            problems, where = self._problems, self._where
            stats = mapping(self._latency_stats, problems, where, N.LATENCY_STATS)
            if stats:
                lwhere = f"{where}.{N.LATENCY_STATS}"
                for kind in N.LATENCY_KINDS:
                    percentiles = numbers(stats.get(kind), problems, lwhere, kind)
                    if percentiles:
                        latency[kind] = percentiles
            self._latency = latency
        return self._latency


def read(body: dict[str, Any], where: str, problems: Problems) -> ExecutionStats:
    return ExecutionStats(
        numbers(body.get(N.ERROR_SUMMARY), problems, where, N.ERROR_SUMMARY, counted=True),
        numbers(body.get(N.EXECUTION_SUMMARY), problems, where, N.EXECUTION_SUMMARY, counted=True),
        body.get(N.LATENCY_STATS),
        where,
        problems,
    )


FAM_ERRORS = S.PromFamily("execution_errors", S.COUNTER, "Execution errors total", S.RUNTIME_SCOPE, ("error_type",))
FAM_STATUS = S.PromFamily("execution_status", S.COUNTER, "Execution status total", S.RUNTIME_SCOPE, ("status_type",))
FAM_LATENCY = S.PromFamily(
    "execution_latency_seconds", S.GAUGE, "Execution latency in seconds", S.RUNTIME_SCOPE, ("percentile",)
)
FAM_DEVICE_LATENCY = S.PromFamily(
    "execution_device_latency_seconds",
    S.GAUGE,
    "Execution latency on the device in seconds",
    S.RUNTIME_SCOPE,
    ("percentile",),
    budget=S.only("percentile", "p50", "p99"),  # the dashboard's; AWS's execution_latency_seconds keeps all seven
)
_LATENCY_FAMILIES = ((N.TOTAL_LATENCY, FAM_LATENCY), (N.DEVICE_LATENCY, FAM_DEVICE_LATENCY))


def gauges(value: ExecutionStats) -> Iterator[S.PromSample]:
    latency = value.latency()
    for kind, family in _LATENCY_FAMILIES:
        percentiles = latency.get(kind)
        if percentiles:
            yield family, (), percentiles, 1.0, ()


def counts(value: ExecutionStats, period: float) -> Iterator[S.PromCount]:
    for summary, family in ((value.error_summary, FAM_ERRORS), (value.execution_summary, FAM_STATUS)):
        if summary:
            yield family, (), summary, 1.0


CW_STATUS = S.CwMetric("Execution", S.COUNT, S.RUNTIME_DIMS, keyed=True)
CW_COMPLETED_RATE = S.CwMetric("ExecutionCompletedPerSecond", S.COUNT_PER_SECOND, S.RUNTIME_DIMS)
CW_ERRORS = S.CwMetric("ExecutionErrors", S.COUNT, S.RUNTIME_DIMS, keyed=True)
CW_ERRORS_TOTAL = S.CwMetric("ExecutionErrorsTotal", S.COUNT, S.RUNTIME_DIMS)
CW_LATENCY = S.CwMetric("ExecutionLatency", S.SECONDS, S.RUNTIME_DIMS, keyed=True, additive=False)
CW_DEVICE_LATENCY = S.CwMetric("DeviceLatency", S.SECONDS, S.RUNTIME_DIMS, keyed=True, additive=False)


def datums(value: ExecutionStats, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    summary = value.execution_summary
    if summary is not None:
        for kind, count in summary.items():
            yield CW_STATUS, (), kind, count
        completed = summary.get(N.STATUS_COMPLETED)
        if period > 0 and completed is not None:
            yield CW_COMPLETED_RATE, (), "", completed / period
    errors = value.error_summary
    if errors is not None:
        for kind, count in errors.items():
            yield CW_ERRORS, (), kind, count
        if errors:
            yield CW_ERRORS_TOTAL, (), "", sum(errors.values())
    latency = value.latency()
    for kind, metric in ((N.TOTAL_LATENCY, CW_LATENCY), (N.DEVICE_LATENCY, CW_DEVICE_LATENCY)):
        for pct, seconds in latency.get(kind, {}).items():
            yield metric, (), pct, seconds


SPEC = S.GroupSpec(
    name=N.EXECUTION_STATS,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_ERRORS, FAM_STATUS, FAM_LATENCY, FAM_DEVICE_LATENCY),
    gauges=gauges,
    counts=counts,
    cloudwatch=(CW_STATUS, CW_COMPLETED_RATE, CW_ERRORS, CW_ERRORS_TOTAL, CW_LATENCY, CW_DEVICE_LATENCY),
    datums=datums,
    tracks=(
        S.Track("executions/s", "executions", "per second", S.RUNTIME_TRACK),
        S.Track("latency ms", "latency", "milliseconds", S.RUNTIME_TRACK),
    ),
)
