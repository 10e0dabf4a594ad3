"""Report -> CloudWatch datums: every metric group with its unit and dimensions.

Reads one parsed neuron-monitor report (dict) through the schema's read layer; returns a list of single-sample
``Datum``s stamped with the report's ``report_time`` (or the wall clock when the daemon did not write one). Each
group's spec (``groups/<name>/spec.py``) names its metrics, units, dimension scopes and values; this module
gives them their dimensions and merges repeated series.

Rules:
* a group object is sent only when it is ``fresh`` (collected for this report; absent = fresh, as AWS's daemon
  writes no ``fresh``) and its ``error`` is empty, so every observation reaches CloudWatch once and the per-period
  counters (execution_stats, neuron_hw_counters, vcpu context switches) are counted exactly once;
* a runtime entry whose ``error`` is set is skipped, as AWS's exporters do;
* values that are not numbers (null latency when idle, strings) are skipped, and so is a count (unit ``Count``)
  outside 0..``MAX_COUNT_PER_PERIOD``, the bound the Prometheus exporter applies too: no source can count that in a
  period (docs/neuron-data.md, "Cumulative counters"), so such a value is damage from the producer, counted in
  ``ReportMapper.absurd`` and logged at most once a minute, never summed;
* latency percentiles are sent as one metric per percentile (``ExecutionLatencyP99`` ...): exact as reported,
  alarmable directly. Statistic sets cannot carry them (CloudWatch derives percentiles from a statistic set only
  when min = max), and rebuilding a distribution from seven quantiles would only approximate them;
* two datums of one series in one report (two runtimes with the same tag, or several runtimes on one core in
  the container-insights preset) are summed for additive metrics and kept as two samples for latencies.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.exporters.cloudwatch.datum import Datum, Dims
from neuron_monitor.exporters.cloudwatch.detail import BUDGET, FULL, SeriesBudget
from neuron_monitor.exporters.cloudwatch.dimensions import DimensionScheme, K8sOwner, clean_dims, k8s_owners
from neuron_monitor.schema.read import Group, read_report
from neuron_monitor.schema.spec import (
    CORE_DIMS,
    DEVICE_DIMS,
    HOST_DIMS,
    MAX_COUNT_PER_PERIOD,
    PHYSICAL_CORE_DIMS,
    RUNTIME_DIMS,
    VCPU_DIMS,
    CwMetric,
)
from neuron_monitor.schema.stream import MAX_RUNTIMES
from neuron_monitor.util.ratelimit import LogRateLimit

log = logging.getLogger("neuron_monitor.exporters.cloudwatch")


def camel(key: str) -> str:
    """``completed_with_err`` -> ``CompletedWithErr``, ``nc_v3.0`` -> ``NcV30``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", key) if part)


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


@dataclass(frozen=True)
class MapOptions:
    high_resolution: bool = False
    per_vcpu: bool = False  # one series per vCPU and usage type (192 vCPUs x 8 on a trn2.48xlarge): off by default
    detail: str = FULL  # BUDGET: leave out what detail.py lists (the command's default); FULL: every metric


class _Emitter:
    """Collects the datums of one report, merging repeated series (sum, or a second sample for latencies)."""

    def __init__(self, timestamp: float, resolution: int) -> None:
        self.timestamp = timestamp
        self.resolution = resolution
        self._by_key: dict[tuple[str, Dims], Datum] = {}
        self._extra: list[Datum] = []

    def __call__(self, name: str, unit: str, dims: Dims, raw: object, additive: bool = True) -> None:
        value = _num(raw)
        if value is None:
            return
        key = (name, dims)
        seen = self._by_key.get(key)
        if seen is None:
            self._by_key[key] = Datum(name, unit, dims, self.timestamp, value, resolution=self.resolution)
        elif additive:
            seen.value += value
        else:
            self._extra.append(Datum(name, unit, dims, self.timestamp, value, resolution=self.resolution))

    def datums(self) -> list[Datum]:
        return [*self._by_key.values(), *self._extra]


@dataclass
class _Ctx:
    emit: _Emitter
    scheme: DimensionScheme
    options: MapOptions
    host: Dims
    cores_per_device: int
    core_owner: dict[str, K8sOwner]
    device_owner: dict[str, K8sOwner]
    budget: SeriesBudget | None = None
    absurd: list[str] = field(default_factory=list)  # metrics whose count was past MAX_COUNT_PER_PERIOD

    def device_of(self, core: str) -> int | None:
        if self.cores_per_device > 0 and core.isdigit():
            return int(core) // self.cores_per_device
        return None


@functools.lru_cache(maxsize=4096)
def metric_name(metric: CwMetric, suffix: str) -> str:
    """A metric's name; a keyed metric's suffix is appended in CamelCase."""
    return metric.name + camel(suffix) if metric.keyed else metric.name


class _Dims:
    """The dimensions of one runtime's (or the host's) datums by scope, built once per key."""

    def __init__(self, ctx: _Ctx, tag: str) -> None:
        self.ctx = ctx
        self.tag = tag
        self._runtime: Dims | None = None
        self._cores: dict[str, Dims] = {}

    def __call__(self, scope: str, key: tuple[str, ...]) -> Dims:
        ctx = self.ctx
        if scope == HOST_DIMS:
            return ctx.host
        if scope == RUNTIME_DIMS:
            if self._runtime is None:
                self._runtime = ctx.scheme.runtime(ctx.host, self.tag)
            return self._runtime
        if scope in (CORE_DIMS, PHYSICAL_CORE_DIMS):
            core = key[0]
            dims = self._cores.get(core)
            if dims is None:
                dims = ctx.scheme.core(ctx.host, self.tag, ctx.device_of(core), core, ctx.core_owner.get(core))
                self._cores[core] = dims
            return dims if scope == CORE_DIMS else (*dims, ("PhysicalNeuronCore", key[1]))
        if scope == DEVICE_DIMS:
            return ctx.scheme.device(ctx.host, key[0], ctx.device_owner.get(key[0]))
        if scope == VCPU_DIMS:
            return ctx.scheme.vcpu(ctx.host, key[0])
        raise ValueError(f"unknown dimension scope {scope!r}")


def _send(ctx: _Ctx, group: Group, dims: _Dims) -> None:
    """Emit a fresh, usable group's datums as its spec names them (values of the wrong type are left out, and
    counts past what any source can count in a period)."""
    if not group.fresh or not group.usable:
        return
    emit = ctx.emit
    for metric, key, suffix, value in group.spec.datums(group.data(), group.period or 0.0, ctx.options.per_vcpu):
        if metric.unit == "Count" and not _plausible_count(value):
            ctx.absurd.append(metric_name(metric, suffix))
            continue
        where = dims(metric.scope, key)
        if metric.key_dims:
            where = (*where, *_key_dims(metric.key_dims, key))
        name = metric_name(metric, suffix)
        if ctx.budget is not None:
            number = _num(value)
            if number is not None and not ctx.budget.keep(metric, name, where, number):
                continue
        emit(name, metric.unit, where, value, metric.additive)


def _plausible_count(value: object) -> bool:
    """False for a number outside 0..MAX_COUNT_PER_PERIOD (a non-number is left out by the emitter anyway)."""
    number = _num(value)
    return number is None or 0.0 <= number <= MAX_COUNT_PER_PERIOD


def _key_dims(names: tuple[str, ...], key: tuple[str, ...]) -> Dims:
    """The dimensions a metric's ``key_dims`` name, valued by the last values of the datum's key (cleaned as every
    dimension value; an empty one is left out)."""
    return clean_dims(zip(names, key[len(key) - len(names) :], strict=True))


class ReportMapper:
    """Turns reports into datums for one dimension scheme and option set."""

    def __init__(self, scheme: DimensionScheme | None = None, options: MapOptions | None = None) -> None:
        self.scheme = scheme or DimensionScheme()
        self.options = options or MapOptions()
        self.budget = SeriesBudget() if self.options.detail == BUDGET else None
        self.runtimes_left_out = 0  # runtime entries past MAX_RUNTIMES, over all reports (issue 32)
        self.absurd = 0  # counts left out as past MAX_COUNT_PER_PERIOD, over all reports
        self._left_out_log = LogRateLimit(60.0)
        self._absurd_log = LogRateLimit(60.0)

    def map(self, report: dict[str, Any], now: float | None = None) -> list[Datum]:
        runtimes = report.get("neuron_runtime_data")
        if isinstance(runtimes, list) and len(runtimes) > MAX_RUNTIMES:  # no host has more: not mapped, counted
            report = {**report, "neuron_runtime_data": runtimes[:MAX_RUNTIMES]}
            self.runtimes_left_out += len(runtimes) - MAX_RUNTIMES
            if self._left_out_log.hit() is not None:
                log.warning(
                    "left out %d runtime entries past %d in one report", len(runtimes) - MAX_RUNTIMES, MAX_RUNTIMES
                )
        read = read_report(report)
        stamp = read.report_time
        timestamp = stamp if stamp is not None else (time.time() if now is None else now)
        emit = _Emitter(timestamp, 1 if self.options.high_resolution else 60)
        core_owner, device_owner = k8s_owners(read.k8s_info)
        ctx = _Ctx(
            emit,
            self.scheme,
            self.options,
            self.scheme.host(read.instance_info),
            read.cores_per_device,
            core_owner,
            device_owner,
            self.budget,
        )
        for entry in read.runtimes:
            if entry.error:
                continue
            dims = _Dims(ctx, entry.tag_written if entry.tag_written.strip() else entry.pid_label)  # blank: the pid
            for group in entry.groups.values():
                _send(ctx, group, dims)
        host = _Dims(ctx, "")
        for group in read.system.values():
            _send(ctx, group, host)
        if ctx.absurd:
            self.absurd += len(ctx.absurd)
            if self._absurd_log.hit() is not None:
                log.warning(
                    "left out %d counts past %.0e in one period (%s): no source counts that much; the producer's "
                    "values are damaged",
                    len(ctx.absurd),
                    MAX_COUNT_PER_PERIOD,
                    ", ".join(sorted(set(ctx.absurd))[:5]),
                )
        return emit.datums()
