"""The bounded queue of encoded requests between the stdin reader and the sender.

``put`` never blocks the reader (so the daemon upstream is never held up by the receiver). The queue holds at
most ``max_reports`` reports (``--buffer-seconds`` of reports at their own cadence) and ``max_bytes`` of encoded
bodies; past either, the oldest reports are dropped whole and counted (logged at most once a minute). The
report the sender is working on is never dropped under it: the next oldest goes instead.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from neuron_monitor.util.ratelimit import LogRateLimit

log = logging.getLogger("neuron_monitor.exporters.otlp")


@dataclass(eq=False)
class Request:
    body: bytes  # as sent (compressed when asked)
    points: int
    report: int  # the report's number (its requests share it)
    parts: int = 1  # requests of that report


class RequestBuffer:
    def __init__(self, max_reports: int, max_bytes: int, log_interval: float = 60.0) -> None:
        self.max_reports = max(max_reports, 1)
        self.max_bytes = max_bytes
        self._queue: deque[Request] = deque()
        self._bytes = 0
        self._reports: dict[int, int] = {}  # report number -> its requests queued
        self._cond = threading.Condition()
        self._closed = False
        self._in_flight: Request | None = None
        self.dropped_reports = 0
        self.dropped_points = 0
        self.dropped_requests = 0
        self.peak_bytes = 0  # the most the queue held after a put (never above max_bytes but for one request)
        self._drop_log = LogRateLimit(log_interval)

    @property
    def bytes(self) -> int:
        with self._cond:
            return self._bytes

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def points(self) -> int:
        with self._cond:
            return sum(r.points for r in self._queue)

    def put(self, requests: list[Request]) -> None:
        with self._cond:
            for request in requests:
                self._queue.append(request)
                self._bytes += len(request.body)
                self._reports[request.report] = self._reports.get(request.report, 0) + 1
            self._trim()
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            self._cond.notify_all()

    def set_max_reports(self, n: int) -> None:
        with self._cond:
            self.max_reports = max(n, 1)

    def _trim(self) -> None:
        dropped_reports = 0
        while (len(self._reports) > self.max_reports or self._bytes > self.max_bytes) and self._queue:
            victim = self._oldest_droppable()
            if victim is None:
                break
            dropped_reports += self._drop_report(victim.report)
        if dropped_reports:
            self.dropped_reports += dropped_reports
            n = self._drop_log.hit()
            if n is not None:
                log.warning(
                    "buffer full (%d reports, %d bytes at most): dropped the oldest; %d reports (%d points) dropped"
                    " so far",
                    self.max_reports,
                    self.max_bytes,
                    self.dropped_reports,
                    self.dropped_points,
                )

    def _oldest_droppable(self) -> Request | None:
        """The oldest request of a report other than the one in flight (a report is dropped whole or not at all,
        and the one being delivered is finished first)."""
        busy = self._in_flight.report if self._in_flight is not None else None
        for request in self._queue:
            if request.report != busy:
                return request
        return None

    def _drop_report(self, report: int) -> int:
        """Drop every queued request of ``report`` except the one in flight; 1 if the report is gone whole."""
        kept: deque[Request] = deque()
        for request in self._queue:
            if request.report == report and request is not self._in_flight:
                self._bytes -= len(request.body)
                self.dropped_points += request.points
                self.dropped_requests += 1
                self._reports[report] -= 1
            else:
                kept.append(request)
        self._queue = kept
        if self._reports.get(report, 0) <= 0:
            self._reports.pop(report, None)
            return 1
        return 0

    def head(self, timeout: float | None = None) -> Request | None:
        """The oldest request (left in the queue and marked in flight), waiting up to ``timeout`` for one; None
        when there is none (or the buffer is closed and empty)."""
        with self._cond:
            if not self._queue and not self._closed:
                self._cond.wait(timeout)
            if not self._queue:
                return None
            self._in_flight = self._queue[0]
            return self._in_flight

    def done(self, request: Request) -> None:
        """``request`` is finished (delivered or given up): remove it."""
        with self._cond:
            if self._in_flight is request:
                self._in_flight = None
            try:
                self._queue.remove(request)
            except ValueError:
                return
            self._bytes -= len(request.body)
            left = self._reports.get(request.report, 0) - 1
            if left <= 0:
                self._reports.pop(request.report, None)
            else:
                self._reports[request.report] = left
            self._cond.notify_all()

    def release(self) -> None:
        """The in-flight request stays queued (to be retried)."""
        with self._cond:
            self._in_flight = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_empty(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue, timeout)
