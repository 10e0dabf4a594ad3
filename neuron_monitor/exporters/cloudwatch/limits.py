"""PutMetricData limits, checked by our own code (moto accepts what AWS rejects).

``check_namespace(ns)`` and ``check_datum(d, now)`` return "" when CloudWatch would accept the item, else why not.
``DatumFilter`` keeps the valid datums of a batch and counts the rejected ones by reason (logged at most once a
minute). Sources: API_PutMetricData, API_MetricDatum, API_Dimension (see docs/cloudwatch.md).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter

from neuron_monitor.exporters.cloudwatch.datum import UNITS, Datum
from neuron_monitor.util.ratelimit import LogRateLimit

log = logging.getLogger("neuron_monitor.exporters.cloudwatch")

MAX_DATUMS_PER_REQUEST = 1000
MAX_REQUEST_BYTES = 1_000_000  # "1 MB per HTTP POST"; we count it uncompressed, the safe reading
MAX_DIMENSIONS = 30
MAX_VALUES_PER_DATUM = 150
MAX_NAME_CHARS = 255
MAX_DIM_VALUE_CHARS = 1024
MAX_ABS_VALUE = 2.0**360
MAX_AGE_SECONDS = 14 * 24 * 3600  # two weeks in the past
MAX_FUTURE_SECONDS = 2 * 3600  # two hours in the future
WINDOW_MARGIN_SECONDS = 300  # stay clear of both edges (clock skew, time spent in the buffer and in flight)
RESOLUTIONS = (1, 60)


def _bad_name(text: str, what: str, max_chars: int = MAX_NAME_CHARS) -> str:
    if not text:
        return f"empty {what}"
    if len(text) > max_chars:
        return f"{what} longer than {max_chars} characters"
    if not text.isascii() or not text.isprintable():
        return f"{what} is not printable ASCII"
    return ""


def _bad_dimension(text: str, what: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """A dimension name or value: as ``_bad_name``, and not blank (API_Dimension: "must include at least one
    non-whitespace character"; one blank value makes CloudWatch refuse the whole request)."""
    why = _bad_name(text, what, max_chars)
    if not why and text.isspace():
        return f"{what} is blank"
    return why


def dimension_value_problem(value: str) -> str:
    """Why CloudWatch would refuse ``value`` as a dimension value ("" when it would not)."""
    return _bad_dimension(value, "dimension value", MAX_DIM_VALUE_CHARS)


def check_namespace(namespace: str) -> str:
    why = _bad_name(namespace, "namespace")
    if why:
        return why
    if namespace.startswith(":"):
        return "namespace starts with ':'"
    if namespace.startswith("AWS/"):
        return "namespace starts with 'AWS/' (reserved for AWS services)"
    return ""


def _bad_number(v: float) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "value is not a number"
    if math.isnan(v) or math.isinf(v):
        return "value is NaN or infinite"
    if abs(v) > MAX_ABS_VALUE:
        return "value outside +-2^360"
    return ""


def in_time_window(timestamp: float, now: float) -> bool:
    return (
        now - MAX_AGE_SECONDS + WINDOW_MARGIN_SECONDS <= timestamp <= now + MAX_FUTURE_SECONDS - WINDOW_MARGIN_SECONDS
    )


def check_datum(d: Datum, now: float) -> str:
    why = _bad_name(d.name, "metric name")
    if why:
        return why
    if len(d.dims) > MAX_DIMENSIONS:
        return f"more than {MAX_DIMENSIONS} dimensions"
    names = set()
    for name, value in d.dims:
        why = _bad_dimension(name, "dimension name") or dimension_value_problem(value)
        if why:
            return why
        if name.startswith(":"):
            return "dimension name starts with ':'"
        if name in names:
            return f"dimension {name} given twice"
        names.add(name)
    if d.unit not in UNITS:
        return f"unknown unit {d.unit!r}"
    if d.resolution not in RESOLUTIONS:
        return f"storage resolution {d.resolution} is not 1 or 60"
    if d.values is None:
        why = _bad_number(d.value)
        if why:
            return why
    else:
        if d.counts is None or len(d.counts) != len(d.values):
            return "Values and Counts differ in length"
        if not d.values or len(d.values) > MAX_VALUES_PER_DATUM:
            return f"more than {MAX_VALUES_PER_DATUM} values (or none)"
        for v in d.values:
            why = _bad_number(v)
            if why:
                return why
        for c in d.counts:
            why = _bad_number(c)
            if why or c <= 0:
                return why or "count not positive"
    if not in_time_window(d.timestamp, now):
        return "timestamp outside the accepted window (2 weeks past .. 2 hours ahead)"
    return ""


class DatumFilter:
    """Drops datums CloudWatch would reject, counting them by reason; logs at most once per ``log_interval``."""

    def __init__(self, log_interval: float = 60.0) -> None:
        self.rejected: Counter[str] = Counter()
        self._invalid_log = LogRateLimit(log_interval)

    def keep_valid(self, datums: list[Datum], now: float | None = None) -> list[Datum]:
        now = time.time() if now is None else now
        kept: list[Datum] = []
        for d in datums:
            why = check_datum(d, now)
            if not why:
                kept.append(d)
                continue
            self.rejected[why] += d.samples()
            n = self._invalid_log.hit()
            if n is not None:
                log.warning("dropped %d invalid datum(s); latest: %s: %s", n, d.name, why)
        return kept
