"""The exporter's state between the reader thread and the HTTP front.

``ExporterState.apply(report)`` counts a report into a snapshot (label values capped, see ``labelcap``) and
swaps that in with one reference assignment (the reader is the only writer), so a scrape sees a report whole or
not at all. Readers call ``view()`` and get one consistent ``View``: the newest snapshot that shapes without error
(its families built on first use; a malformed newer one is counted and passed over, so the previous report keeps
being served whole), whether it may be served, and the health verdict.

Staleness comes from the reports, not from arrival times (a replayed or bursty stream arrives faster than it was
written): the report interval is the median gap between the ``report_time`` of recent reports (the shortest group
``period`` until there are two), and the newest report is served until it is older than the staleness window::

    window = max(stale_periods x interval, 2 x longest group period, stale_floor)

After that (or before any report) only the exporter's own metrics are served, so Prometheus marks the Neuron
series stale instead of repeating old values. Health also fails once stdin has closed.
"""

from __future__ import annotations

import itertools
import logging
import math
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from neuron_monitor.exporters.prometheus.created import CreatedClock
from neuron_monitor.exporters.prometheus.snapshot import Shaped, ShapeOptions, Snapshot, SnapshotBuilder
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.groups.neuron_device_health.spec import BLIND_RULES, NeuronDeviceHealth, blind_signals
from neuron_monitor.groups.neuron_device_health.spec import NAME as HEALTH_GROUP
from neuron_monitor.schema.read import Report, read_report
from neuron_monitor.schema.stream import MAX_RUNTIMES  # entries past it are not served (issue 32)
from neuron_monitor.util.ranges import device_ranges
from neuron_monitor.util.sanitize import sanitize

log = logging.getLogger("neuron_monitor.exporters.prometheus")

DEFAULT_INTERVAL = 5.0  # neuron-monitor's default period, used until reports tell otherwise
DEFAULT_STALE_PERIODS = 3.0
DEFAULT_STALE_FLOOR = 10.0
BAD_INPUT_REASONS = ("negative", "non_finite", "absurd", "label_too_long")
SERIES_LIMIT = "series_limit"  # reports cut at --max-series-per-report; shown once one was (see ``series_limit``)


@dataclass(frozen=True)
class View:
    snapshot: Snapshot | None
    shaped: Shaped | None
    serving: bool
    healthy: bool
    reason: str
    received_wall: float
    interval: float
    window: float = 0.0
    age: float | None = None
    changes: int = 0  # the state's change count when this view was taken (see ``ExporterState.changes``)


BLIND_TEXT_MAX = 400  # characters of /readyz's reason


def blind_reason(read: Report) -> str:
    """Why the report's health verdicts are blind: the signals the daemon did not find, or found and could not
    read, and on which devices (``neuron_device_health``'s ``signal_missing`` and ``signal_unreadable`` reasons),
    sanitized and capped; "" when the daemon read every signal."""
    group = read.system.get(HEALTH_GROUP)
    value = group.data_as(NeuronDeviceHealth) if group is not None else None
    blind = blind_signals(value) if value is not None else {}
    if not blind:
        return ""
    parts = [
        f"{BLIND_RULES[rule]} {signal} on neuron_device {device_ranges(sorted(set(devs)))}"
        for (rule, signal), devs in blind.items()
    ]
    text = sanitize("the daemon " + "; ".join(parts))
    return text if len(text) <= BLIND_TEXT_MAX else text[: BLIND_TEXT_MAX - 3] + "..."


def has_device_data(report: dict[str, Any], read: Report | None = None) -> bool:
    """True when ``report`` lists a Neuron device: its hardware info counts one, or a system group's spec counts one
    in its object (``GroupSpec.device_count``). ``read``: the report as the schema read it, when the caller has it."""
    read = read if read is not None else read_report(report)
    hardware = read.hardware_info
    count = hardware.neuron_device_count if hardware is not None else None
    if isinstance(count, int) and count > 0:
        return True
    for group in read.system.values():
        counted = group.spec.device_count
        if counted is not None and counted(group.data()) > 0:
            return True
    return False


class ExporterState:
    def __init__(
        self,
        options: ShapeOptions | None = None,
        stale_periods: float = DEFAULT_STALE_PERIODS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        stale_floor: float = DEFAULT_STALE_FLOOR,
        created_series: bool = False,
    ) -> None:
        self.builder = SnapshotBuilder(options)
        self.stale_periods = stale_periods
        self.stale_floor = stale_floor
        self.created = CreatedClock() if created_series else None
        self._clock = clock
        self._wall = wall_clock
        self._snapshot: Snapshot | None = None  # newest accepted report
        self._received = 0.0
        self._received_wall = 0.0
        self._good: tuple[Snapshot, Shaped, float, float] | None = None  # newest report that shaped well
        self._shape_lock = threading.Lock()
        self._report_times: deque[float] = deque(maxlen=9)
        self.accepted_reports = 0
        self.rejected_reports = 0
        self.group_errors_total: Counter[str] = Counter()
        self.bad_input_total: Counter[str] = Counter()
        self.input_closed = False
        self.ready = False  # a report with Neuron device data was applied (/readyz)
        self.blind = ""  # why the newest report's health verdicts are blind ("" when they are not; /readyz)
        self.changes = 0  # grows with every change the self-metrics show (a report, a rejection, bad input, EOF)
        self._lock = threading.Lock()  # guards the counters above against a concurrent view()
        self._last_reject_log = -1e18
        self._last_bad_log = -1e18

    def apply(self, report: dict[str, Any], line: bytes | None = None) -> bool:
        """Count and publish a report; False (and the previous report stays) when it is malformed. Runtime
        entries past `MAX_RUNTIMES` are left out (counted as ``absurd`` bad input): no host has more. ``line``:
        the report's line when ``report`` is its thin version (``counting.thin_native``): the snapshot keeps it
        and decodes it whole when it is shaped."""
        runtimes = report.get("neuron_runtime_data")
        extra = len(runtimes) - MAX_RUNTIMES if isinstance(runtimes, list) else 0
        if extra > 0 and isinstance(runtimes, list):
            if line is not None:  # left out of the whole report, which shaping would decode again: count it whole
                return self.apply(orjson.loads(line))
            report["neuron_runtime_data"] = runtimes[:MAX_RUNTIMES]
            self._count_bad(Counter({"absurd": extra}))
        try:
            snapshot = self.builder.ingest(report)
        except MalformedReport as e:
            self._reject(e)
            return False
        read = snapshot.read
        if line is not None:
            snapshot.line = line
            snapshot.read = None  # the thin report's: shaping reads the whole one
        now = self._clock()
        bad = snapshot.bad_input
        with self._lock:
            if snapshot.report_time is not None and math.isfinite(snapshot.report_time):
                times = self._report_times
                if times and snapshot.report_time <= times[-1]:
                    times.clear()  # time went backwards: a restarted or replayed stream; start over
                times.append(snapshot.report_time)
            self.group_errors_total.update(snapshot.group_errors)
            self.accepted_reports += 1
            self.changes += 1
            self._received = now
            self._received_wall = self._wall()
            self._snapshot = snapshot
        if snapshot.series_cut:
            bad = bad + Counter({SERIES_LIMIT: 1})
        if bad:
            self._count_bad(bad)
        if not self.ready and has_device_data(report, read):
            self.ready = True
        self.blind = blind_reason(read) if read is not None else ""
        return True

    def _count_bad(self, bad: Counter[str]) -> None:
        with self._lock:
            self.bad_input_total.update(bad)
            self.changes += 1
        now = self._clock()
        if now - self._last_bad_log >= 60.0:
            log.warning("dropped or truncated bad input values: %s", ", ".join(f"{k}={v}" for k, v in bad.items()))
            self._last_bad_log = now

    def bad_input_counts(self) -> dict[str, float]:
        with self._lock:
            counts = {reason: float(self.bad_input_total.get(reason, 0)) for reason in BAD_INPUT_REASONS}
            cut = self.bad_input_total.get(SERIES_LIMIT, 0)
        if cut:  # not served before a report is cut, so a normal scrape stays as it was
            counts[SERIES_LIMIT] = float(cut)
        return counts

    def _reject(self, e: MalformedReport) -> None:
        with self._lock:
            self.rejected_reports += 1
            self.changes += 1
        now = self._clock()
        if now - self._last_reject_log >= 60.0:
            log.warning("skipped a malformed report: %s", e)
            self._last_reject_log = now

    def _served(self) -> tuple[Snapshot, Shaped, float, float] | None:
        """The newest snapshot that shapes without error, with its receive times."""
        with self._shape_lock:
            with self._lock:
                snapshot, received, received_wall = self._snapshot, self._received, self._received_wall
            good = self._good
            if snapshot is None or (good is not None and good[0] is snapshot):
                return good
            cut_when_counted = snapshot.series_cut
            try:
                shaped = snapshot.shaped()
            except MalformedReport as e:
                self._reject(e)
                with self._lock:
                    if self._snapshot is snapshot:  # do not try it again
                        self._snapshot = good[0] if good else None
                        if good:
                            self._received, self._received_wall = good[2], good[3]
                return good
            if snapshot.truncated_labels:
                self._count_bad(Counter({"label_too_long": snapshot.truncated_labels}))
            if snapshot.series_cut and not cut_when_counted:
                self._count_bad(Counter({SERIES_LIMIT: 1}))
            if self.created is not None:
                self.created.stamp(shaped.families, received_wall)
            self._good = (snapshot, shaped, received, received_wall)
            return self._good

    def close_input(self) -> None:
        with self._lock:
            self.input_closed = True
            self.changes += 1

    def interval(self) -> float:
        """The report interval: the median gap between recent ``report_time`` values, else the shortest period."""
        times = list(self._report_times)
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        if gaps:
            return statistics.median(gaps)
        snap = self._snapshot
        if snap is not None and snap.min_period > 0:
            return snap.min_period
        return DEFAULT_INTERVAL

    def window(self, interval: float | None = None) -> float:
        """How old the newest report may get before it is stale (see the module docstring); ``interval``: the
        `interval` the caller already has."""
        snap = self._snapshot
        longest = snap.max_period if snap is not None else 0.0
        if interval is None:
            interval = self.interval()
        return max(self.stale_periods * interval, 2.0 * longest, self.stale_floor)

    def view(self) -> View:
        """The newest report that shapes well (shaped here on first use), with its freshness."""
        return self.view_of(self._served())

    def newest(self) -> Snapshot | None:
        """The newest accepted report's snapshot (shaped or not)."""
        with self._lock:
            return self._snapshot

    def served(self) -> tuple[Snapshot, Shaped, float, float] | None:
        """The newest snapshot that shapes without error (shaped here on first use), with its receive times:
        what ``publish.Publisher`` prepares a rendering of, then serves through ``view_of``."""
        return self._served()

    def view_of(self, served: tuple[Snapshot, Shaped, float, float] | None) -> View:
        """The ``View`` of ``served`` (a ``served()`` result, or None: no report) as of now: its age and freshness,
        the interval and the change count; never shapes anything."""
        with self._lock:
            interval = self.interval()
            window = self.window(interval)  # the median of the gaps once per view
            changes = self.changes
        if served is None:
            reason = "stdin closed before any report" if self.input_closed else "no report received yet"
            return View(None, None, False, False, reason, 0.0, interval, window, changes=changes)
        snapshot, shaped, received, received_wall = served
        age = self._clock() - received
        fresh = age <= window
        if not fresh:
            reason = f"last report {age:.1f}s ago (stale after {window:.1f}s)"
        elif self.input_closed:
            reason = "stdin closed"
        else:
            reason = "ok"
        return View(
            snapshot,
            shaped,
            fresh,
            fresh and not self.input_closed,
            reason,
            received_wall,
            interval,
            window,
            age,
            changes,
        )
