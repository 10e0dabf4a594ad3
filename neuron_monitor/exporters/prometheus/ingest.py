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
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from neuron_monitor.exporters.stream import LineBuffer, ReportStream

log = logging.getLogger("neuron_monitor.exporters.prometheus")

CHUNK = 256 * 1024  # one read: four trn2.48xlarge reports; the daemon's pipe holds up to 1 MiB


class StdinIngest:
    """Feeds the reports of ``fileobj`` to ``apply`` on ``loop``; calls ``at_eof`` (on the loop) at end of input."""

    def __init__(
        self,
        fileobj: BinaryIO,
        stream: ReportStream,
        apply: Callable[[dict[str, Any]], object],
        at_eof: Callable[[], None],
    ) -> None:
        self.fileobj = fileobj
        self.stream = stream
        self.apply = apply
        self.at_eof = at_eof
        self.lines = LineBuffer(stream.max_line_bytes)
        self.polled = False  # True when read on the loop, False when a thread reads
        self._loop: asyncio.AbstractEventLoop | None = None
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

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, CHUNK)
        except BlockingIOError:
            return
        except OSError as e:
            log.warning("reading stdin failed: %s", e)
            data = b""
        if data:
            self._take(self.lines.feed(data))
            return
        assert self._loop is not None
        self._loop.remove_reader(self._fd)
        self._take(self.lines.finish())
        self.stream.stats.eof = True
        self.at_eof()

    def _take(self, lines: list[bytes | None]) -> None:
        stream, apply = self.stream, self.apply
        for line in lines:
            if line is None:
                stream.oversize()
                continue
            report = stream.decode(line)
            if report is not None:
                apply(report)

    def _read_blocking(self) -> None:
        for report in self.stream:  # the same stream and counters as the polled way
            self.apply(report)
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: the exporter is stopping anyway
            self._loop.call_soon_threadsafe(self.at_eof)
