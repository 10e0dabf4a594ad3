"""The report: AWS's JSON shape in one place, our additive keys, and the one-line encoder.

Shape (as AWS's neuron-monitor prints it; key order as in real reports)::

    {"neuron_runtime_data": [{"pid", "neuron_runtime_tag", "error", "report": {<group>: {...}}}],
     "system_data": {<group>: {...}},
     "instance_info": {...}, "neuron_hardware_info": {...},
     "report_time": <epoch seconds>,                                  # additive
     "neuron_monitor": {"version", "start_time", "reports", "skipped_collections", "late_collections",
                        "collection_seconds", "error"}}                 # additive: the daemon's own health

Every group object is ``{"period": s, ...data..., "error": "", "fresh": bool}``. A non-empty ``error`` means the
group's data is not to be used, except for the groups whose spec says ``partial_errors`` (neuron_hw_counters names
the ECC counters an older driver does not expose and still reports the others); consumers read this through
``neuron_monitor.schema.read.Group.usable``. ``fresh`` (additive) is true when
the group was collected for this report and false when its newest data is carried over from an earlier report
because the group's period is longer than the report interval. A consumer that accumulates the per-period counters
(execution_stats, neuron_hw_counters, context switches) adds them only when ``fresh`` is true, and so counts each
exactly once whatever the group periods. ``report_time`` is the wall-clock time the report was assembled.
``neuron_monitor.skipped_collections`` counts the collection slots skipped since start because the reader (or a
collection) was slower than the period; ``late_collections`` counts collections that started more than 0.1 s (or a
quarter period, if longer) after their due time; ``collection_seconds`` is how long this report's collection took.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from neuron_monitor.schema.names import INSTANCE_INFO_KEYS


def encoded_values(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each dict and list value replaced by its JSON bytes (an orjson ``Fragment``, spliced into the
    line as is). For a body a group returns unchanged report after report (the same object): encoding a report
    then copies those bytes instead of walking the objects again. The result is for `encode` only. A body JSON
    cannot carry (a bug: the groups bound their values) is returned as it is, so that `encode` words it as the
    group's error instead of this raising."""
    try:
        return {k: orjson.Fragment(orjson.dumps(v)) if isinstance(v, dict | list) else v for k, v in body.items()}
    except orjson.JSONEncodeError:
        return body


def group_object(body: dict[str, Any], period: float, error: str, fresh: bool) -> dict[str, Any]:
    """Wrap a group body as AWS prints it: period first, error last, then our ``fresh``."""
    if "error" not in body and "fresh" not in body:  # the usual body: one dict display, no Python-level loop
        obj = {"period": period, **body}
        obj["period"] = period  # the argument wins over a period in the body, which stays first either way
        obj["error"] = error
        obj["fresh"] = fresh
        return obj
    obj = {"period": period}
    for k, v in body.items():
        if k not in ("period", "error", "fresh"):
            obj[k] = v
    obj["error"] = error
    obj["fresh"] = fresh
    return obj


def fresh_group_object(body: dict[str, Any], window: float) -> dict[str, Any]:
    """A runtime body just collected, wrapped: the same object as ``group_object(body, body.get("period", window),
    body.get("error", ""), True)``, made in one dict display for the usual body (neither ``error`` nor ``fresh``
    in it; a ``period`` in it is the one the display keeps), by `group_object` otherwise."""
    if "error" in body or "fresh" in body:
        return group_object(body, body.get("period", window), body.get("error", ""), True)
    obj = {"period": window, **body}
    obj["error"] = ""
    obj["fresh"] = True
    return obj


def error_object(period: float, error: str, fresh: bool) -> dict[str, Any]:
    return {"period": period, "error": error, "fresh": fresh}


def empty_instance_info(error: str) -> dict[str, Any]:
    info: dict[str, Any] = dict.fromkeys(INSTANCE_INFO_KEYS, "")
    info["error"] = error
    return info


def empty_hardware_info(error: str) -> dict[str, Any]:
    return {
        "neuron_device_type": "",
        "neuron_device_version": "",
        "neuroncore_version": "",
        "neuron_device_count": 0,
        "neuron_device_memory_size": 0,
        "neuroncore_per_device_count": 0,
        "logical_neuroncore_config": 0,
        "error": error,
    }


def runtime_entry(pid: int, tag: str, error: str, groups: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return runtime_entry_in_order(pid, tag, error, {name: groups[name] for name in sorted(groups)})


def runtime_entry_in_order(pid: int, tag: str, error: str, report: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`runtime_entry` of group objects already in name order (taken as they are)."""
    return {"pid": pid, "neuron_runtime_tag": tag, "error": error, "report": report}


def build_report(
    runtime_entries: list[dict[str, Any]],
    system_data: dict[str, dict[str, Any]],
    instance_info: dict[str, Any],
    hardware_info: dict[str, Any],
    report_time: float,
) -> dict[str, Any]:
    return {
        "neuron_runtime_data": runtime_entries,
        "system_data": dict(sorted(system_data.items())),  # by name (names are unique: no value is compared)
        "instance_info": instance_info,
        "neuron_hardware_info": hardware_info,
        "report_time": round(report_time, 6),
    }


def encode(report: dict[str, Any]) -> bytes:
    """One compact JSON line, newline-terminated. NaN/Inf become null (orjson), never invalid JSON. A group whose
    data JSON cannot carry (an integer beyond 64 bits from a damaged counter, a value of an unknown type: a bug)
    is sent as that group's ``error`` instead (`encode_each_group`), so one bad value never stops the report."""
    try:
        return orjson.dumps(report, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return orjson.dumps(encode_each_group(report), option=orjson.OPT_APPEND_NEWLINE)


def encode_each_group(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with every group object (system and runtime) and every other top-level object that orjson
    cannot encode replaced by its error form: the group's period and freshness with ``error`` saying why; a
    runtime entry or info object keeps only what encodes. Logged once per group name."""
    out = dict(report)
    system = report.get("system_data")
    if isinstance(system, dict):
        out["system_data"] = {name: _encodable_group(name, obj) for name, obj in system.items()}
    entries = report.get("neuron_runtime_data")
    if isinstance(entries, list):
        out["neuron_runtime_data"] = [_encodable_entry(entry) for entry in entries]
    for key, value in report.items():
        if key not in ("system_data", "neuron_runtime_data") and not _encodes(value):
            out[key] = {k: v for k, v in value.items() if _encodes(v)} if isinstance(value, dict) else None
            _log_once(key, "its value")
    return out


def _encodable_entry(entry: Any) -> Any:
    if not isinstance(entry, dict) or _encodes(entry):
        return entry
    fixed = {k: v for k, v in entry.items() if k == "report" or _encodes(v)}
    groups = entry.get("report")
    if isinstance(groups, dict):
        fixed["report"] = {name: _encodable_group(name, obj) for name, obj in groups.items()}
    return fixed


def _encodable_group(name: str, obj: Any) -> Any:
    if _encodes(obj):
        return obj
    _log_once(name, "a value JSON cannot carry")
    period = obj.get("period", 0.0) if isinstance(obj, dict) else 0.0
    fresh = obj.get("fresh", True) if isinstance(obj, dict) else True
    return error_object(
        period if _encodes(period) else 0.0,
        "the group's data held a value JSON cannot carry (an integer beyond 64 bits?); left out of this report",
        fresh is True,
    )


def _encodes(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


_logged: set[str] = set()


def _log_once(name: str, what: str) -> None:
    if name not in _logged:
        _logged.add(name)
        logging.getLogger("neuron_monitor").warning("%s: %s; sent as the group's error", name, what)
