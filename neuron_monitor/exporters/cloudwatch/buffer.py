"""A bounded, thread-safe queue of datums between the stdin reader and the CloudWatch sender.

``put`` never blocks: when the queue holds more than ``max_samples`` samples the oldest datums are dropped and
counted (logged at most once per ``log_interval``), so the daemon upstream is never back-pressured by CloudWatch.
``requeue`` puts a failed request back at the front, where drop-oldest applies to it first. ``take`` waits for data
and packs one request with ``batching.pack``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.util.ratelimit import LogRateLimit

log = logging.getLogger("neuron_monitor.exporters.cloudwatch")

DEFAULT_MAX_SAMPLES = 100_000


class DatumBuffer:
    def __init__(self, max_samples: int = DEFAULT_MAX_SAMPLES, log_interval: float = 60.0) -> None:
        self.max_samples = max_samples
        self._queue: deque[Datum] = deque()
        self._samples = 0
        self._cond = threading.Condition()
        self._closed = False
        self.dropped_samples = 0
        self._drop_log = LogRateLimit(log_interval)
        self._dropped_since_log = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def samples(self) -> int:
        with self._cond:
            return self._samples

    @property
    def closed(self) -> bool:
        return self._closed

    def _trim(self) -> None:
        dropped = 0
        while self._samples > self.max_samples and self._queue:
            n = self._queue.popleft().samples()
            self._samples -= n
            dropped += n
        if dropped:
            self.dropped_samples += dropped
            self._dropped_since_log += dropped
            if self._drop_log.hit() is not None:
                log.warning(
                    "CloudWatch buffer full (%d samples): dropped the %d oldest samples (%d in total so far)",
                    self.max_samples,
                    self._dropped_since_log,
                    self.dropped_samples,
                )
                self._dropped_since_log = 0

    def put(self, datums: list[Datum]) -> None:
        if not datums:
            return
        with self._cond:
            self._queue.extend(datums)
            self._samples += sum(d.samples() for d in datums)
            self._trim()
            self._cond.notify_all()

    def requeue(self, datums: list[Datum]) -> None:
        with self._cond:
            self._queue.extendleft(reversed(datums))
            self._samples += sum(d.samples() for d in datums)
            self._trim()
            self._cond.notify_all()

    def close(self) -> None:
        """No more puts are coming; ``take`` returns [] once the queue is empty."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, packer: Callable[[deque[Datum]], list[Datum]], timeout: float | None = None) -> list[Datum]:
        """Wait until datums are queued (or closed/timeout), then pop one request's worth with ``packer``."""
        with self._cond:
            if not self._queue and not self._closed:
                self._cond.wait(timeout)
            if not self._queue:
                return []
            batch = packer(self._queue)
            self._samples -= sum(d.samples() for d in batch)
            return batch

    def drain(self) -> list[Datum]:
        with self._cond:
            rest = list(self._queue)
            self._queue.clear()
            self._samples = 0
            return rest
