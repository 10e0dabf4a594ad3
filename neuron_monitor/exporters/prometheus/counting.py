"""The ingest pass: add a report's per-period counts to the counter ledger, and note group health.

Only what counters need is read here (execution and error summaries, FLOP rates, ECC events, CPU time and
context switches), with their types checked: a wrong type raises ``MalformedReport`` before the ledger update is
committed. Gauges are shaped later, when the report is first served (``snapshot``). Each group object's
freshness decides whether its counts are added (see ``ledger``).

Counters never lie: a well-typed but impossible per-period value is dropped (not added) and counted by reason in
``CountResult.bad`` -- ``negative``, ``non_finite`` (NaN or infinity, which a JSON parser other than orjson may
let through) or ``absurd`` (over ``MAX_COUNT_PER_PERIOD`` events, a FLOP rate over ``MAX_FLOPS`` per core, a CPU
percentage over 100, or a period over ``MAX_PERIOD``). The rest of the report is applied, so every served
counter only grows, by finite amounts, and stays finite.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.exporters.prometheus.labelcap import DEFAULT_MAX_LABEL_LENGTH, truncate
from neuron_monitor.exporters.prometheus.ledger import SYSTEM, LedgerUpdate, Subject
from neuron_monitor.exporters.prometheus.values import group_error, mapping, number, sequence, text
from neuron_monitor.report import group_data_usable

RUNTIME_GROUPS = frozenset({"neuroncore_counters", "execution_stats", "memory_used", "neuron_runtime_vcpu_usage"})
SYSTEM_GROUPS = frozenset({"vcpu_usage", "memory_info", "neuron_hw_counters"})
CPU_MODES: tuple[str, ...] = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq")
SUMMARIES: tuple[tuple[str, str], ...] = (
    ("error_summary", "execution_errors"),
    ("execution_summary", "execution_status"),
)
FLOP_COUNTERS: dict[str, str] = {
    "flops": "neuroncore_floating_point_operations",
    "effective_flops": "neuroncore_effective_floating_point_operations",
}


MAX_COUNT_PER_PERIOD = 1e12  # events in one period: 2e11/s over 5 s, far beyond any real workload or device
MAX_FLOPS = 1e18  # FLOP/s of one NeuronCore: about 10,000 times a real one
MAX_PERIOD = 86400.0  # seconds; a group period is seconds to minutes
MAX_PERCENT = 100.01  # CPU percentages are rounded to hundredths


def check_amount(value: float, limit: float, bad: Counter[str]) -> float | None:
    """``value`` when it is a possible amount (finite, 0..limit), else None with the reason counted in ``bad``."""
    if 0.0 <= value <= limit:
        return value
    if math.isnan(value) or math.isinf(value):
        bad["non_finite"] += 1
    elif value < 0:
        bad["negative"] += 1
    else:
        bad["absurd"] += 1
    return None


def _count(value: Any, where: str, key: str, bad: Counter[str], limit: float = MAX_COUNT_PER_PERIOD) -> float | None:
    """A counted value: an int or float within 0..limit (fast path), None for null or an impossible value
    (counted in ``bad``); any other type rejects the report."""
    cls = value.__class__
    if (cls is int or cls is float) and 0 <= value <= limit:
        amount: float = value
        return amount
    number_value = number(value, f"{where}.{key}")
    return None if number_value is None else check_amount(number_value, limit, bad)


def _period(obj: dict[str, Any], where: str, bad: Counter[str]) -> float:
    """A group's period for time-based counters (0 when missing or impossible)."""
    period = number(obj.get("period"), f"{where}.period")
    if period is None:
        return 0.0
    return check_amount(period, MAX_PERIOD, bad) or 0.0


def runtime_identity(entry: dict[str, Any], where: str) -> tuple[str, str]:
    """(pid, tag) of a runtime entry as label values; the tag defaults to the pid, as neuron-monitor does."""
    pid = text(entry.get("pid"), f"{where}.pid")
    tag = entry.get("neuron_runtime_tag")
    return pid, (text(tag, f"{where}.neuron_runtime_tag") if tag is not None else pid)


@dataclass
class CountResult:
    groups_seen: set[str] = field(default_factory=set)
    groups_failed: set[str] = field(default_factory=set)
    group_errors: Counter[str] = field(default_factory=Counter)
    bad: Counter[str] = field(default_factory=Counter)
    min_period: float = 0.0
    max_period: float = 0.0
    runtimes: int = 0
    label_limit: int = DEFAULT_MAX_LABEL_LENGTH  # ledger keys are label values: capped as shaping caps them

    def label(self, value: str) -> str:
        limit = self.label_limit
        return value if limit <= 0 or len(value) <= limit else truncate(value, limit)

    def check(self, name: str, obj: dict[str, Any], where: str, fresh: bool) -> bool:
        """Record a group's period and error; True when its data may be used."""
        self.groups_seen.add(name)
        period = obj.get("period")
        if isinstance(period, (int, float)) and not isinstance(period, bool) and 0 < period <= MAX_PERIOD:
            self.min_period = period if self.min_period <= 0 else min(self.min_period, period)
            self.max_period = max(self.max_period, period)
        if group_error(obj, where):
            self.groups_failed.add(name)
            if fresh:
                self.group_errors[name] += 1
            return group_data_usable(name, obj)
        return True


def count_report(
    report: dict[str, Any], update: LedgerUpdate, label_limit: int = DEFAULT_MAX_LABEL_LENGTH
) -> CountResult:
    result = CountResult(label_limit=label_limit)
    _count_system(mapping(report.get("system_data"), "system_data") or {}, update, result)
    runtimes = sequence(report.get("neuron_runtime_data"), "neuron_runtime_data") or []
    result.runtimes = len(runtimes)
    for i, entry in enumerate(runtimes):
        where = f"neuron_runtime_data[{i}]"
        entry = mapping(entry, where)
        if entry is not None:
            _count_runtime(entry, where, update, result)
    return result


def _count_runtime(entry: dict[str, Any], where: str, update: LedgerUpdate, result: CountResult) -> None:
    pid, tag = runtime_identity(entry, where)
    tag = result.label(tag)
    subject: Subject = ("rt", tag)
    update.touch(subject)
    if text(entry.get("error"), f"{where}.error"):
        result.groups_seen.add("runtime")
        result.groups_failed.add("runtime")
        result.group_errors["runtime"] += 1
        return
    for name, obj in (mapping(entry.get("report"), f"{where}.report") or {}).items():
        if name not in RUNTIME_GROUPS:
            continue  # unknown groups are ignored, as AWS's exporter does
        gwhere = f"{where}.report.{name}"
        obj = mapping(obj, gwhere)
        if obj is None:
            continue
        fresh = update.is_fresh(obj, (pid, tag, name))
        if not result.check(name, obj, gwhere, fresh):
            continue
        if name == "execution_stats":
            totals = update.touch(subject)
            for summary, family in SUMMARIES:
                swhere = f"{gwhere}.{summary}"
                for kind, value in (mapping(obj.get(summary), swhere) or {}).items():
                    count = _count(value, swhere, kind, result.bad)
                    if count is not None:
                        key = (family, result.label(kind))
                        totals[key] = totals.get(key, 0.0) + (count if fresh else 0.0)
        elif name == "neuroncore_counters":
            period = _period(obj, gwhere, result.bad)
            totals = update.touch(subject)
            cwhere = f"{gwhere}.neuroncores_in_use"
            for core, data in (mapping(obj.get("neuroncores_in_use"), cwhere) or {}).items():
                if data.__class__ is not dict:
                    data = mapping(data, f"{cwhere}.{core}") or {}
                for flop_key, family in FLOP_COUNTERS.items():
                    value = data.get(flop_key)
                    if value is not None:
                        rate = _count(value, f"{cwhere}.{core}", flop_key, result.bad, MAX_FLOPS) or 0.0
                        counter = (family, result.label(core))
                        totals[counter] = totals.get(counter, 0.0) + (rate * period if fresh else 0.0)


def _count_system(system_data: dict[str, Any], update: LedgerUpdate, result: CountResult) -> None:
    totals = update.touch(SYSTEM)
    for name, obj in system_data.items():
        if name not in SYSTEM_GROUPS:
            continue
        where = f"system_data.{name}"
        obj = mapping(obj, where)
        if obj is None:
            continue
        fresh = update.is_fresh(obj, ("sys", name))
        if not result.check(name, obj, where, fresh):
            continue
        if name == "neuron_hw_counters":
            seen: set[str] = set()
            for i, device in enumerate(sequence(obj.get("neuron_devices"), f"{where}.neuron_devices") or ()):
                dwhere = f"{where}.neuron_devices[{i}]"
                device = mapping(device, dwhere) or {}
                index = result.label(text(device.get("neuron_device_index"), f"{dwhere}.neuron_device_index"))
                seen.add(index)
                for event, value in device.items():
                    if event != "neuron_device_index":
                        count = _count(value, dwhere, event, result.bad)
                        if count is not None:
                            ecc_key = ("hardware_ecc_events", index, result.label(event))
                            totals[ecc_key] = totals.get(ecc_key, 0.0) + (count if fresh else 0.0)
            for gone in [k for k in totals if k[0] == "hardware_ecc_events" and k[1] not in seen]:
                del totals[gone]  # a device no longer listed
        elif name == "vcpu_usage":
            usage_data = mapping(obj.get("usage_data"), f"{where}.usage_data")
            average = mapping(obj.get("average_usage"), f"{where}.average_usage")
            period = _period(obj, where, result.bad)
            if usage_data and average is not None:
                for mode in CPU_MODES:
                    pct = _count(average.get(mode), f"{where}.average_usage", mode, result.bad, MAX_PERCENT) or 0.0
                    seconds = pct / 100.0 * period * len(usage_data) if fresh else 0.0
                    update.add(SYSTEM, ("system_cpu_seconds", mode), seconds)
            switches = _count(obj.get("context_switch_count"), where, "context_switch_count", result.bad)
            if switches is not None:
                update.add(SYSTEM, ("system_context_switches",), switches if fresh else 0.0)
