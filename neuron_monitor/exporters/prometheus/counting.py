"""The ingest pass: add a report's per-period counts to the counter ledger, and note group health.

Only what counters need is read here (execution and error summaries, FLOP rates, ECC events, CPU time and
context switches), with their types checked: a wrong type raises ``MalformedReport`` before the ledger update is
committed. Gauges are shaped later, when the report is first served (``snapshot``). Each group object's
freshness decides whether its counts are added (see ``ledger``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

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


def _count(value: Any, where: str, key: str) -> float | None:
    """A counted value: an int or float (fast path), None for null; anything else rejects the report."""
    cls = value.__class__
    if cls is int or cls is float:
        return value
    return number(value, f"{where}.{key}")


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
    min_period: float = 0.0
    runtimes: int = 0

    def check(self, name: str, obj: dict[str, Any], where: str, fresh: bool) -> bool:
        """Record a group's period and error; True when its data may be used."""
        self.groups_seen.add(name)
        period = obj.get("period")
        if isinstance(period, (int, float)) and not isinstance(period, bool) and period > 0:
            self.min_period = period if self.min_period <= 0 else min(self.min_period, period)
        if group_error(obj, where):
            self.groups_failed.add(name)
            if fresh:
                self.group_errors[name] += 1
            return group_data_usable(name, obj)
        return True


def count_report(report: dict[str, Any], update: LedgerUpdate) -> CountResult:
    result = CountResult()
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
                    count = _count(value, swhere, kind)
                    if count is not None:
                        key = (family, kind)
                        totals[key] = totals.get(key, 0.0) + (count if fresh else 0.0)
        elif name == "neuroncore_counters":
            period = number(obj.get("period"), f"{gwhere}.period") or 0.0
            totals = update.touch(subject)
            cwhere = f"{gwhere}.neuroncores_in_use"
            for core, data in (mapping(obj.get("neuroncores_in_use"), cwhere) or {}).items():
                if data.__class__ is not dict:
                    data = mapping(data, f"{cwhere}.{core}") or {}
                for key, family in FLOP_COUNTERS.items():
                    value = data.get(key)
                    if value is not None:
                        rate = _count(value, f"{cwhere}.{core}", key) or 0.0
                        counter = (family, core)
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
                index = text(device.get("neuron_device_index"), f"{dwhere}.neuron_device_index")
                seen.add(index)
                for event, value in device.items():
                    if event != "neuron_device_index":
                        count = _count(value, dwhere, event)
                        if count is not None:
                            key = ("hardware_ecc_events", index, event)
                            totals[key] = totals.get(key, 0.0) + (count if fresh else 0.0)
            for key in [k for k in totals if k[0] == "hardware_ecc_events" and k[1] not in seen]:
                del totals[key]  # a device no longer listed
        elif name == "vcpu_usage":
            usage_data = mapping(obj.get("usage_data"), f"{where}.usage_data")
            average = mapping(obj.get("average_usage"), f"{where}.average_usage")
            period = number(obj.get("period"), f"{where}.period") or 0.0
            if usage_data and average is not None:
                for mode in CPU_MODES:
                    pct = number(average.get(mode), f"{where}.average_usage.{mode}") or 0.0
                    seconds = pct / 100.0 * period * len(usage_data) if fresh else 0.0
                    update.add(SYSTEM, ("system_cpu_seconds", mode), seconds)
            switches = number(obj.get("context_switch_count"), f"{where}.context_switch_count")
            if switches is not None:
                update.add(SYSTEM, ("system_context_switches",), switches if fresh else 0.0)
