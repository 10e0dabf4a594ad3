"""``execution_stats`` (runtime): executions by status and errors by type over the period (per-period counts),
and the latency percentiles (seconds) of the period, total and on the device."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.execution_stats import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import count, finite, latency_text
from neuron_monitor.schema.values import Problems, mapping, numbers


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
            stats = mapping(self._latency_stats, problems, where, B.LATENCY_STATS)
            if stats:
                lwhere = f"{where}.{B.LATENCY_STATS}"
                for kind in B.LATENCY_KINDS:
                    percentiles = numbers(stats.get(kind), problems, lwhere, kind)
                    if percentiles:
                        latency[kind] = percentiles
            self._latency = latency
        return self._latency


def read(body: dict[str, Any], where: str, problems: Problems) -> ExecutionStats:
    return ExecutionStats(
        numbers(body.get(B.ERROR_SUMMARY), problems, where, B.ERROR_SUMMARY, counted=True),
        numbers(body.get(B.EXECUTION_SUMMARY), problems, where, B.EXECUTION_SUMMARY, counted=True),
        body.get(B.LATENCY_STATS),
        where,
        problems,
    )


FAM_ERRORS = S.PromFamily(
    "execution_errors", S.COUNTER, "Execution errors total", S.RUNTIME_SCOPE, ("error_type",), created=True
)
FAM_STATUS = S.PromFamily(
    "execution_status", S.COUNTER, "Execution status total", S.RUNTIME_SCOPE, ("status_type",), created=True
)
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
_LATENCY_FAMILIES = ((B.TOTAL_LATENCY, FAM_LATENCY), (B.DEVICE_LATENCY, FAM_DEVICE_LATENCY))


def gauges(value: ExecutionStats) -> Iterator[S.PromSample]:
    latency = value.latency()
    for kind, family in _LATENCY_FAMILIES:
        percentiles = latency.get(kind)
        if percentiles:
            yield S.PromSample(family, (), percentiles, 1.0, ())


def counts(value: ExecutionStats, period: float) -> Iterator[S.PromCount]:
    for summary, family in ((value.error_summary, FAM_ERRORS), (value.execution_summary, FAM_STATUS)):
        if summary:
            yield S.PromCount(family, (), summary, 1.0)


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
        completed = summary.get(B.STATUS_COMPLETED)
        if period > 0 and completed is not None:
            yield CW_COMPLETED_RATE, (), "", completed / period
    errors = value.error_summary
    if errors is not None:
        for kind, count in errors.items():
            yield CW_ERRORS, (), kind, count
        if errors:
            yield CW_ERRORS_TOTAL, (), "", sum(errors.values())
    latency = value.latency()
    for kind, metric in ((B.TOTAL_LATENCY, CW_LATENCY), (B.DEVICE_LATENCY, CW_DEVICE_LATENCY)):
        for pct, seconds in latency.get(kind, {}).items():
            yield metric, (), pct, seconds


# ---- neuron-monitor-det: the errors of a period, by problem type ------------------------------------------------
# problem types taken from error_summary: type -> key
ERROR_SUMMARY_TYPES: dict[str, str] = {
    "generic_error": B.ERROR_GENERIC,
    "numerical_error": B.ERROR_NUMERICAL,
    "transient_error": B.ERROR_TRANSIENT,
    "model_error": B.ERROR_MODEL,
    "runtime_error": B.ERROR_RUNTIME,
    "hardware_error": B.ERROR_HARDWARE,
}
# problem types taken from execution_summary: type -> key
EXECUTION_SUMMARY_TYPES: dict[str, str] = {
    "timed_out": B.STATUS_TIMED_OUT,
    "incorrect_input": B.STATUS_INCORRECT_INPUT,
    "failed_to_queue": B.STATUS_FAILED_TO_QUEUE,
}
# completed_with_err counts executions that ended in an error other than a numerical one; the part of it that
# error_summary does not already explain becomes "execution_error"
EXECUTION_ERROR = "execution_error"
_EXPLAINED = (B.ERROR_GENERIC, B.ERROR_MODEL, B.ERROR_RUNTIME, B.ERROR_HARDWARE)
_ENDED = (B.STATUS_COMPLETED_WITH_ERR, B.STATUS_COMPLETED_WITH_NUM_ERR, B.STATUS_TIMED_OUT)
_RULES = (
    ("generic_error", S.ERROR, "executions failed with a generic runtime error"),
    ("numerical_error", S.ERROR, "executions produced NaN or infinite results (numerical errors)"),
    ("transient_error", S.WARNING, "executions failed with a transient error (a retry may succeed)"),
    ("model_error", S.ERROR, "executions failed because of the model (model errors)"),
    ("runtime_error", S.ERROR, "executions failed inside the Neuron runtime (runtime errors)"),
    ("hardware_error", S.ERROR, "executions failed on the Neuron hardware (hardware errors)"),
    ("timed_out", S.ERROR, "executions timed out"),
    ("incorrect_input", S.WARNING, "executions were refused for incorrect input"),
    ("failed_to_queue", S.WARNING, "executions could not be queued"),
    (EXECUTION_ERROR, S.ERROR, "executions completed with an error that error_summary does not name"),
)
DET_RULES: dict[str, S.DetRule] = {
    kind: S.DetRule(kind, S.RUNTIME_TRACK, severity, message) for kind, severity, message in _RULES
}


def period_errors(value: ExecutionStats) -> dict[str, int]:
    """Problem type -> count over the period (only the non-zero ones)."""
    es = value.error_summary or {}
    xs = value.execution_summary or {}
    errors: dict[str, int] = {}
    for etype, key in ERROR_SUMMARY_TYPES.items():
        n = count(es.get(key))
        if etype == "numerical_error":
            n = max(n, count(xs.get(B.STATUS_COMPLETED_WITH_NUM_ERR)))
        if n:
            errors[etype] = n
    for etype, key in EXECUTION_SUMMARY_TYPES.items():
        n = count(xs.get(key))
        if n:
            errors[etype] = n
    unexplained = count(xs.get(B.STATUS_COMPLETED_WITH_ERR)) - sum(count(es.get(k)) for k in _EXPLAINED)
    if unexplained > 0:
        errors[EXECUTION_ERROR] = unexplained
    return errors


def executions(value: ExecutionStats) -> tuple[int, int]:
    """(completed, every execution that ended: completed, with an error, or timed out) over the period."""
    xs = value.execution_summary or {}
    completed = count(xs.get(B.STATUS_COMPLETED))
    return completed, completed + sum(count(xs.get(k)) for k in _ENDED)


def runtime_facts(value: ExecutionStats, fresh_period: float | None, per_device: int) -> S.RuntimeFacts:
    """The executions that ended in a fresh period (a runtime that executes is not hung)."""
    return S.RuntimeFacts(executions=executions(value)[1]) if fresh_period is not None else S.NO_FACTS


def findings(value: ExecutionStats) -> Iterator[S.DetFinding]:
    for kind, n in period_errors(value).items():
        yield DET_RULES[kind], (), n, {}


# ---- the timeline ---------------------------------------------------------------------------------------------
TRACK_EXECUTIONS = S.Track(
    "executions/s", "executions", "per second", S.RUNTIME_TRACK, when=S.PERIOD, per_second=True, digits=3
)
TRACK_LATENCY = S.Track("latency ms", "latency", "milliseconds", S.RUNTIME_TRACK, when=S.PERIOD, digits=4)


def timeline(value: ExecutionStats) -> Iterator[S.TimelineSample]:
    """Completed and failed executions (failed: ended without completing, or not queued); p50/p99 latency."""
    completed, ended = executions(value)
    failed = ended - completed + period_errors(value).get("failed_to_queue", 0)
    yield TRACK_EXECUTIONS, (), {"completed": completed, "failed": failed}
    total = value.latency().get(B.TOTAL_LATENCY, {})
    p50 = finite(total.get("p50"))
    if p50 is not None:
        yield TRACK_LATENCY, (), {"p50": p50 * 1e3, "p99": (finite(total.get("p99")) or 0.0) * 1e3}


# ---- neuron-monitor-top ---------------------------------------------------------------------------------------
COL_RATE = S.TopColumn(S.TOP_RUNTIMES, "exec/s", 8, order=40)
COL_ERRORS = S.TopColumn(S.TOP_RUNTIMES, "errors", 7, order=50)
COL_P50 = S.TopColumn(S.TOP_RUNTIMES, "p50", 9, order=60)
COL_P99 = S.TopColumn(S.TOP_RUNTIMES, "p99", 9, order=70)


def top(value: ExecutionStats, period: float | None) -> Iterator[S.TopCell]:
    """Completed executions per second, the period's error count, p50/p99 total latency."""
    summary = value.execution_summary
    completed = summary.get(B.STATUS_COMPLETED) if summary is not None else None
    yield COL_RATE, (), f"{completed / period:.1f}" if completed is not None and period else "-", ""
    errors = int(sum(value.error_summary.values())) if value.error_summary is not None else None
    yield COL_ERRORS, (), "-" if errors is None else str(errors), "bold red" if errors else ""
    total = value.latency().get(B.TOTAL_LATENCY, {})
    yield COL_P50, (), latency_text(total.get("p50")), ""
    yield COL_P99, (), latency_text(total.get("p99")), ""


SPEC = S.GroupSpec(
    name=N.EXECUTION_STATS,
    placement=S.RUNTIME,
    read=read,
    doc=__doc__ or "",
    prometheus=(FAM_ERRORS, FAM_STATUS, FAM_LATENCY, FAM_DEVICE_LATENCY),
    gauges=gauges,
    counts=counts,
    uncounted=(((B.LATENCY_STATS,), False),),  # the latencies are gauges
    cloudwatch=(CW_STATUS, CW_COMPLETED_RATE, CW_ERRORS, CW_ERRORS_TOTAL, CW_LATENCY, CW_DEVICE_LATENCY),
    datums=datums,
    tracks=(TRACK_EXECUTIONS, TRACK_LATENCY),
    timeline=timeline,
    timeline_order=10,
    det_rules=tuple(DET_RULES.values()),
    findings=findings,
    runtime_facts=runtime_facts,
    top_columns=(COL_RATE, COL_ERRORS, COL_P50, COL_P99),
    top=top,
)
