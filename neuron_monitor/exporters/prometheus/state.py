"""The exporter's state between the reader thread and the HTTP threads.

``ExporterState.apply(report)`` counts a report into a snapshot and swaps it in with one reference assignment (the
reader is the only writer). Readers call ``view()`` and get one consistent ``View``: the newest snapshot that
shapes without error (its families built on first use; a malformed newer one is counted and passed over, so the
previous report keeps being served whole), whether it may be served, and the health verdict. Data is served while
the newest report is younger than ``stale_periods`` report intervals; after that (or never) only the exporter's own
metrics are served, so Prometheus marks the Neuron series stale instead of repeating old values. Health also fails
once stdin has closed.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_monitor.exporters.prometheus.snapshot import Shaped, ShapeOptions, Snapshot, SnapshotBuilder
from neuron_monitor.exporters.prometheus.values import MalformedReport

log = logging.getLogger("neuron_monitor.exporters.prometheus")

DEFAULT_INTERVAL = 5.0  # neuron-monitor's default period, used until reports tell otherwise
MIN_INTERVAL = 0.5


@dataclass(frozen=True)
class View:
    snapshot: Snapshot | None
    shaped: Shaped | None
    serving: bool
    healthy: bool
    reason: str
    received_wall: float
    interval: float


class ExporterState:
    def __init__(
        self,
        options: ShapeOptions | None = None,
        stale_periods: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.builder = SnapshotBuilder(options)
        self.stale_periods = stale_periods
        self._clock = clock
        self._wall = wall_clock
        self._snapshot: Snapshot | None = None  # newest accepted report
        self._received = 0.0
        self._received_wall = 0.0
        self._good: tuple[Snapshot, Shaped, float, float] | None = None  # newest report that shaped well
        self._shape_lock = threading.Lock()
        self._arrivals: deque[float] = deque(maxlen=9)
        self.rejected_reports = 0
        self.group_errors_total: Counter[str] = Counter()
        self.input_closed = False
        self._lock = threading.Lock()  # guards the counters above against a concurrent view()
        self._last_reject_log = -1e18

    def apply(self, report: dict[str, Any]) -> bool:
        """Shape and publish a report; False (and the previous report stays) when it is malformed."""
        try:
            snapshot = self.builder.ingest(report)
        except MalformedReport as e:
            self._reject(e)
            return False
        now = self._clock()
        with self._lock:
            self._arrivals.append(now)
            self.group_errors_total.update(snapshot.group_errors)
            self._received = now
            self._received_wall = self._wall()
            self._snapshot = snapshot
        return True

    def _reject(self, e: MalformedReport) -> None:
        with self._lock:
            self.rejected_reports += 1
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
            self._good = (snapshot, shaped, received, received_wall)
            return self._good

    def close_input(self) -> None:
        self.input_closed = True

    def interval(self) -> float:
        """The report interval: the larger of the median gap between recent reports and the shortest group period."""
        arrivals = list(self._arrivals)
        snap = self._snapshot
        period = snap.min_period if snap is not None else 0.0
        if len(arrivals) >= 3:
            gaps = [b - a for a, b in itertools.pairwise(arrivals)]
            return max(statistics.median(gaps), period, MIN_INTERVAL)
        return max(period, MIN_INTERVAL) if period > 0 else DEFAULT_INTERVAL

    def view(self) -> View:
        served = self._served()
        with self._lock:
            interval = self.interval()
        if served is None:
            reason = "stdin closed before any report" if self.input_closed else "no report received yet"
            return View(None, None, False, False, reason, 0.0, interval)
        snapshot, shaped, received, received_wall = served
        age = self._clock() - received
        fresh = age <= self.stale_periods * interval
        if not fresh:
            reason = f"last report {age:.1f}s ago (more than {self.stale_periods:g} x {interval:.1f}s)"
        elif self.input_closed:
            reason = "stdin closed"
        else:
            reason = "ok"
        return View(snapshot, shaped, fresh, fresh and not self.input_closed, reason, received_wall, interval)
