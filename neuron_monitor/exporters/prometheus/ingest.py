"""Report lines from stdin, read on the exporter's event loop.

The loop that serves HTTP also reads stdin (``loop.add_reader``), so the exporter runs on one thread: a scrape
never waits for the interpreter lock behind an ingest (a thread switch can take the 5 ms switch interval), and
each report is applied whole between two requests. Every readable event reads what the pipe holds (up to
``CHUNK`` bytes), splits it into lines (``LineBuffer``: an oversize line is dropped while it streams in) and
applies each report through ``ReportStream.decode``, which counts and skips bad lines.

Standard input that cannot be polled (a regular file, ``/dev/null``) is read by a thread instead, which applies
the reports the same way (``ExporterState`` is thread-safe); end of input is then handed to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from neuron_monitor.exporters.stream import LineBuffer, ReportStream, taken

log = logging.getLogger("neuron_monitor.exporters.prometheus")

CHUNK = 256 * 1024  # one read: four trn2.48xlarge reports; the daemon's pipe holds up to 1 MiB
READ_EVERY = 0.25  # seconds between reads of stdin while small reports keep coming (see StdinIngest)
LARGE_REPORT = 16 * 1024  # reports this long or longer are applied as they arrive; shorter ones coalesce


class StdinIngest:
    """Feeds the reports of ``fileobj`` to ``apply`` on ``loop``; calls ``at_eof`` (on the loop) at end of input.

    A pipe (or socket) is read without blocking. While small reports keep coming (under ``LARGE_REPORT`` bytes),
    it is read at most every ``read_every`` seconds: the first report after a pause wakes the loop
    at once, later ones wait for the next tick, and every HTTP request reads what has arrived first
    (``refresh``), so a scrape always serves the newest report; a request's read also pushes the next tick back,
    so while requests come more often than ``read_every`` no tick wakes the process at all. At 10 small reports
    a second that is at most four wake-ups instead of ten, and each wake-up of an idle process costs more than
    applying a small report (our daemon's pipe holds at least four reports, more than a tick's worth at 0.1 s).
    Larger reports are applied as they arrive, so that a scrape never has to ingest several of them before it
    can answer; a line that is already ``LARGE_REPORT`` bytes long while it streams in (the first large report)
    is read as it arrives too, at the pipe's speed (before issue 32: 64 KiB per tick, 30 MiB in 111 s)."""

    def __init__(
        self,
        fileobj: BinaryIO,
        stream: ReportStream,
        apply: Callable[[dict[str, Any]], object],
        at_eof: Callable[[], None],
        read_every: float = READ_EVERY,
    ) -> None:
        self.fileobj = fileobj
        self.stream = stream
        self.apply = apply
        self.at_eof = at_eof
        self.read_every = read_every
        self.lines = LineBuffer(stream.max_line_bytes)
        self.polled = False  # True when read on the loop, False when a thread reads
        self.closed = False
        self.large = False  # the newest report was LARGE_REPORT bytes or more
        self._nonblocking = False  # O_NONBLOCK set by us (and cleared again by ``restore``)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._fd = -1

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start reading: on ``loop`` when the input can be polled, else on a daemon thread."""
        self._loop = loop
        try:
            self._fd = self.fileobj.fileno()
            loop.add_reader(self._fd, self._readable)
            self.polled = True
        except (OSError, ValueError):  # a regular file or /dev/null (EPERM), or no usable descriptor
            threading.Thread(target=self._read_blocking, name="stdin", daemon=True).start()
            return
        mode = os.fstat(self._fd).st_mode
        if (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and os.get_blocking(self._fd):
            os.set_blocking(self._fd, False)  # a terminal stays blocking: read only when it is readable
            self._nonblocking = True

    def restore(self) -> None:
        """Give stdin back as it was handed to us (blocking), for whoever shares it after we exit."""
        if self._nonblocking:
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, True)

    @property
    def next_tick(self) -> float | None:
        """The loop time of the next tick, or None while the loop's reader is armed instead (or input ended)."""
        return None if self._timer is None else self._timer.when()

    def refresh(self) -> None:
        """Apply whatever small reports have arrived (before answering a request). A no-op unless stdin is read
        without blocking and its reports are small: large ones are applied as they arrive, on the loop."""
        if self._nonblocking and not self.closed and not self.large:
            self._drain()
            if self._timer is not None and not self.large:  # the pipe was just read: push the next tick back
                assert self._loop is not None
                self._timer.cancel()
                self._timer = self._loop.call_later(self.read_every, self._tick)

    def _readable(self) -> None:
        self._drain()
        if self.closed or not self._nonblocking or self.large:
            return  # large reports are applied as they arrive: a scrape then only shapes, never ingests
        assert self._loop is not None
        self._loop.remove_reader(self._fd)  # until the next tick: see the class docstring
        self._timer = self._loop.call_later(self.read_every, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.closed:
            return
        assert self._loop is not None
        if self._drain() and not self.large:
            self._timer = self._loop.call_later(self.read_every, self._tick)
        elif not self.closed:
            self._loop.add_reader(self._fd, self._readable)  # a pause (or large reports): wake on the next one

    def _drain(self) -> int:
        """Read and apply what stdin holds now (one read unless non-blocking); the number of bytes read."""
        got = 0
        while True:
            try:
                data = os.read(self._fd, CHUNK)
            except BlockingIOError:
                return got
            except OSError as e:
                log.warning("reading stdin failed: %s", e)
                data = b""
            if not data:
                self._end()
                return got
            got += len(data)
            self._take(self.lines.feed(data))
            if len(data) < CHUNK or not self._nonblocking:
                return got  # the pipe is (very likely) empty now; the next readiness or tick reads on

    def _end(self) -> None:
        assert self._loop is not None
        self.closed = True
        self._loop.remove_reader(self._fd)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._take(self.lines.finish())
        self.stream.stats.eof = True
        self.at_eof()

    def _take(self, lines: list[bytes | None]) -> None:
        newest = next((len(line) for line in reversed(lines) if line), None)
        if newest is not None:
            self.large = newest >= LARGE_REPORT  # the newest report tells
        if self.lines.pending >= LARGE_REPORT:
            self.large = True  # a large line is streaming in: read it as it arrives, at pipe speed, not per tick
        for report in self.stream.reports(taken(lines)):  # each line let go once parsed, before it is applied
            self.apply(report)

    def _read_blocking(self) -> None:
        for report in self.stream:  # the same stream and counters as the polled way
            self.apply(report)
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: the exporter is stopping anyway
            self._loop.call_soon_threadsafe(self.at_eof)
