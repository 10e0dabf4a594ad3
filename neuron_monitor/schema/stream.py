"""Robust reading of report lines from a byte stream (stdin), shared by every consumer of reports.

Yields each valid report as a dict. A line that is not JSON, not a JSON object, has a wrong top-level type, or
exceeds ``max_line_bytes`` is counted in ``StreamStats`` and skipped (logged at most once per ``log_interval``
seconds); the stream never raises on input. EOF ends the iteration; ``stats.eof`` tells it happened.

Two ways in: iterate a ``ReportStream`` over a blocking file (pull), or push the chunks an event loop read into
a ``LineBuffer`` and hand its lines to ``ReportStream.reports`` (push; the Prometheus exporter reads stdin on its
event loop this way). Both split lines with ``LineBuffer``, so they count and skip the same lines.

Reading (`chunks`, the one way every command reads its input): a stream with a descriptor is read with
``os.read`` on the descriptor, never through the buffered file object. A reader thread blocked in
``sys.stdin.buffer.readline`` holds the buffered object's lock, and a process that stops (SIGTERM, SIGINT) while
its input is still open then dies at interpreter shutdown with "Fatal Python error: ... could not acquire lock for
<stdin>" and status 134 (issue 43.2); ``os.read`` holds no lock, so the thread is simply left behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from neuron_monitor.util.ratelimit import LogRateLimit, held_back

log = logging.getLogger("neuron_monitor.schema.stream")

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
# Runtime entries one report may have: the driver gives each device 16 data-block slots (one per process) and the
# largest hosts have 16 devices. Every exporter leaves out (and counts) the entries past it.
MAX_RUNTIMES = 256
READ_BYTES = 1024 * 1024  # at most this much is read at once; a longer line arrives in pieces

# top-level key -> the JSON types accepted for it (None always accepted: AWS writes null for empty parts)
_TOP_LEVEL_TYPES: dict[str, tuple[type, ...]] = {
    "neuron_runtime_data": (list,),
    "system_data": (dict,),
    "instance_info": (dict,),
    "neuron_hardware_info": (dict,),
    "neuron_k8s_info": (dict,),
    "report_time": (int, float),
    "neuron_monitor": (dict,),
}


@dataclass
class StreamStats:
    lines: int = 0
    reports: int = 0
    bad_lines: int = 0
    oversize_lines: int = 0
    last_error: str = ""
    eof: bool = False


def validate_report(obj: Any) -> str:
    """Return "" if ``obj`` has the report's top-level shape, else what is wrong."""
    if not isinstance(obj, dict):
        return f"report is a JSON {type(obj).__name__}, not an object"
    for key, types in _TOP_LEVEL_TYPES.items():
        v = obj.get(key)
        if v is not None and not isinstance(v, types):
            return f"{key} has the wrong type ({type(v).__name__})"
    if isinstance(obj.get("neuron_runtime_data"), list):
        for i, entry in enumerate(obj["neuron_runtime_data"]):
            if not isinstance(entry, dict):
                return f"neuron_runtime_data[{i}] is not an object"
    if not any(k in obj for k in ("neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info")):
        return "no neuron-monitor report keys in the object"
    return ""


class ReportStream:
    """Iterates the valid reports of a line stream, counting and skipping bad lines."""

    def __init__(
        self,
        fileobj: BinaryIO,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        log_interval: float = 60.0,
    ) -> None:
        self._f = fileobj
        self.max_line_bytes = max_line_bytes
        self.stats = StreamStats()
        self._bad_log = LogRateLimit(log_interval)
        self.thinned = False  # the last report decoded was a thin version of its line (see ``decode``)

    def _bad(self, why: str) -> None:
        self.stats.bad_lines += 1
        self.stats.last_error = why
        n = self._bad_log.hit()
        if n is not None:
            log.warning("skipped a bad report line: %s%s", why, held_back(n, "bad lines"))

    def oversize(self) -> None:
        """Count a line longer than ``max_line_bytes`` (already discarded)."""
        self.stats.oversize_lines += 1
        self.stats.lines += 1
        self._bad(f"line longer than {self.max_line_bytes} bytes")

    def decode(self, line: bytes, thin: Callable[[bytes], bytes | None] | None = None) -> dict[str, Any] | None:
        """The report on one line, or None (counted when the line is not blank) for anything else. With ``thin``
        (the Prometheus exporter's ``counting.thin_native``), the line it gives back, if any, is decoded instead: a
        thin version of the same report, which ``thinned`` then says."""
        self.thinned = False
        if not line or line.isspace():
            return None
        self.stats.lines += 1
        try:
            small = thin(line) if thin is not None else None
            if small is not None:
                obj = orjson.loads(small)
                self.thinned = True
            else:
                obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            self._bad(f"invalid JSON: {e}")
            return None
        why = validate_report(obj)
        if why:
            self._bad(why)
            return None
        self.stats.reports += 1
        return obj  # type: ignore[no-any-return]

    def reports(self, lines: Iterable[bytes | None]) -> Iterator[dict[str, Any]]:
        """The reports among ``lines`` as ``LineBuffer`` gives them (``None``: an oversize line, counted)."""
        for line in lines:
            if line is None:
                self.oversize()
                continue
            report = self.decode(line)
            line = None  # the line is not held while its report is used (it can be 10 MB and more)
            if report is not None:
                yield report

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = LineBuffer(self.max_line_bytes)
        for piece in chunks(self._f):  # a report is yielded once its line is whole
            yield from self.reports(taken(buffer.feed(piece)))
        yield from self.reports(taken(buffer.finish()))
        self.stats.eof = True


def chunks(stream: BinaryIO, size: int = READ_BYTES) -> Iterator[bytes]:
    """The bytes of ``stream`` as they arrive (at most ``size`` at once) until end of input: ``os.read`` on its
    descriptor when it has one (no lock held while waiting, see the module docstring), else its ``read``."""
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, ValueError):  # BytesIO and the like
        fd = None
    while True:
        chunk = os.read(fd, size) if fd is not None else stream.read(size)
        if not chunk:
            return
        yield chunk


def taken(lines: list[bytes | None]) -> Iterator[bytes | None]:
    """The lines of ``lines`` in order, each removed from the list as it is handed out (so that ``reports`` lets
    a long line go once it is parsed, before its report is used)."""
    lines.reverse()
    while lines:
        yield lines.pop()


class LineBuffer:
    """Lines from a byte stream pushed in chunks: ``feed`` returns the complete lines (without their newline);
    a line longer than ``max_line_bytes`` is dropped while it streams in (never held whole) and returned as
    ``None`` once its newline (or the end of input) arrives. ``finish`` returns the last line at end of input."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._dropping = False

    def feed(self, data: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        start = 0
        find = data.find
        while (end := find(b"\n", start)) >= 0:
            if self._dropping:
                lines.append(None)
                self._dropping = False
            elif self._parts:
                size = self._size + end - start
                lines.append(b"".join([*self._parts, data[start:end]]) if size <= self.max_line_bytes else None)
                self._parts.clear()
                self._size = 0
            else:
                lines.append(data[start:end] if end - start <= self.max_line_bytes else None)
            start = end + 1
        if start < len(data) and not self._dropping:
            self._size += len(data) - start
            if self._size > self.max_line_bytes:
                self._parts.clear()
                self._size = 0
                self._dropping = True
            else:
                self._parts.append(data[start:] if start else data)
        return lines

    @property
    def pending(self) -> int:
        """Bytes of the line streaming in (not yet complete); past ``max_line_bytes`` while one is dropped."""
        return self.max_line_bytes + 1 if self._dropping else self._size

    def finish(self) -> list[bytes | None]:
        """The unterminated last line, if any (``None`` if it was too long)."""
        if self._dropping:
            self._dropping = False
            return [None]
        if not self._parts:
            return []
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return [line]
