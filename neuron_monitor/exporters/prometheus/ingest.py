"""Report lines from stdin, read on the exporter's event loop.

The loop that serves HTTP also reads stdin (``loop.add_reader``), so the exporter runs on one thread: a scrape
never waits for the interpreter lock behind an ingest (a thread switch can take the 5 ms switch interval). Every
readable event reads what the pipe holds (up to ``CHUNK`` bytes) and splits it into lines (``LineBuffer``: an
oversize line is dropped while it streams in); then each line is decoded in one turn of the loop and its report
counted (``apply``) in the next (``ReportStream.decode`` counts and skips bad lines; a report shorter than
``LARGE_REPORT``, a host-only one, is decoded and counted in one turn, with up to ``SHORT_LINES_PER_TURN`` - 1
more such lines of the same read; a longer one is decoded thin when the compiled helper can,
``counting.thin_native``, and its snapshot keeps the line to decode it whole if it is published), so a request
waits for one of these
steps at most, never for a whole read's reports (issue 41). Reading pauses while more than ``CHUNK``
bytes of lines wait to be applied, so about one read's lines are held at most. Requests never ingest: they
serve the last complete rendering (``publish``). Each next step is a timer, which the loop runs after the requests
that came meanwhile, and while a scrape is due (``hold``, the publisher's prediction) steps wait for it.

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
from collections import deque
from collections.abc import Callable
from typing import Any, BinaryIO

from neuron_monitor.exporters.prometheus.counting import thin_native
from neuron_monitor.schema.stream import LineBuffer, ReportStream
from neuron_monitor.util.pipes import grow_pipe, pipe_size

log = logging.getLogger("neuron_monitor.exporters.prometheus")

CHUNK = 256 * 1024  # one read: four trn2.48xlarge reports; the daemon's pipe holds up to 1 MiB
READ_EVERY = 1.0  # seconds between reads of stdin while small reports keep coming, at most (see StdinIngest)
READ_EARLY = 0.2  # a turn awake anyway reads when the next tick is less than this share of READ_EVERY away
STALE_SHARE = 4  # a tick comes within this share of the staleness floor (``read_every_for``)
PIPE_SHARE = 4  # small reads coalesce only while one took at most 1/PIPE_SHARE of the pipe's buffer
PIPE_BYTES = 64 * 1024  # the buffer assumed when the pipe cannot tell (Linux's default pipe size)
PIPE_GROWN = 1 << 20  # stdin's pipe is grown to this (Linux's default pipe-max-size), as the daemon grows its stdout
TICK_LINES = 8  # long reports coalesce by tick too while stdin's pipe holds this many of them (see StdinIngest)
LONG_TICKS = 4  # long reports' ticks come this many times per ``read_every`` (every 0.25 s)
LARGE_REPORT = 16 * 1024  # reports this long or longer are read as they arrive; shorter ones coalesce
SHORT_LINES_PER_TURN = 6  # short lines of a read decoded and applied in one turn of the loop
THIN_MAX = 4 * 1024 * 1024  # longer lines (none a daemon writes) are decoded whole: their snapshot keeps no line
_END = object()  # end of input, queued behind the lines read before it


def read_every_for(stale_floor: float) -> float:
    """The ticks' interval for an exporter whose staleness window is never shorter than ``stale_floor`` seconds:
    ``READ_EVERY``, or a ``STALE_SHARE``-th of the floor when that is shorter, so a report that waited for its
    tick is never near stale when it is counted (a served report's age is measured from its count: with a 0.5 s
    floor and 1 s ticks, up would flap between ticks). Long reports' ticks are a ``LONG_TICKS``-th of it."""
    return min(READ_EVERY, stale_floor / STALE_SHARE)


def decode_line(stream: ReportStream, line: bytes) -> tuple[dict[str, Any] | None, bytes | None]:
    """The report on ``line`` as the exporter takes it in, for ``ExporterState.apply``: a line of ``LARGE_REPORT``
    to ``THIN_MAX`` bytes decoded thin when the compiled helper can (``counting.thin_native``), then with the line (its
    snapshot decodes it whole if it is published); else decoded whole, with None."""
    if len(line) < LARGE_REPORT or len(line) > THIN_MAX:
        return stream.decode(line), None
    report = stream.decode(line, thin_native)
    return report, (line if report is not None and stream.thinned else None)


class StdinIngest:
    """Feeds the reports of ``fileobj`` to ``apply`` on ``loop``; calls ``at_eof`` (on the loop) at end of input.

    A pipe (or socket) is read without blocking. While small reports keep coming (under ``LARGE_REPORT`` bytes),
    it is read on a tick every ``read_every`` seconds: the first report after a pause wakes the loop at once,
    later ones wait for the next tick, or are read a little before it in a turn the loop is awake for anyway
    (``read_early``: right after a response). At 10 small reports and 10 scrapes a second that is about one read
    and one publication a second, in a scrape's turn, instead of four in turns of their own; each
    read, count and publication of a process that sleeps between events costs several times what it costs hot.
    Coalescing holds while a read took at most 1/``PIPE_SHARE`` of the pipe's buffer (``F_GETPIPE_SZ``), so the
    writer always has room for four times the rate it had; past that the loop's reader is armed and each report
    is read as it arrives (our daemon never blocks on a full pipe, but it would skip collection slots: see
    daemon/output.py). Reports of ``LARGE_REPORT`` bytes or more coalesce too, on ticks ``LONG_TICKS`` times as
    often, while the pipe holds ``TICK_LINES`` of them (``attach`` grows a pipe to ``PIPE_GROWN``, as our daemon
    grows its stdout): the reports of one read are decoded and counted back to back while the caches are warm (a
    trn2.48xlarge report's decode and count 0.85 -> 0.63 ms inside the running exporter); else they are read as
    they arrive. A line that is already ``LARGE_REPORT`` bytes long while it streams in (the first large report)
    is read as it arrives too, at the pipe's speed (before issue 32: 64 KiB per tick, 30 MiB in 111 s). The lines
    of one read are decoded and applied one step per turn of the loop, a few short reports' in one (the module
    docstring)."""

    def __init__(
        self,
        fileobj: BinaryIO,
        stream: ReportStream,
        apply: Callable[[dict[str, Any], bytes | None], object],
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
        self.closed = False  # end of input was read
        self.large = False  # the newest report was LARGE_REPORT bytes or more
        self._nonblocking = False  # O_NONBLOCK set by us (and cleared again by ``restore``)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reading = False  # the loop's reader is armed
        self._queue: deque[bytes | object | None] = deque()  # lines read, not yet decoded (None: oversize)
        self._report: dict[str, Any] | None = None  # decoded, to be applied in the next step
        self._line: bytes | None = None  # its line when it was decoded thin (``apply`` keeps it for publication)
        self._stepping = False  # a step is scheduled
        self._queued = 0  # bytes of the lines in the queue
        self._got = 0  # bytes the last read took
        self._pipe_bytes = PIPE_BYTES  # the pipe's buffer (read at ``attach``, again before each tick is set)
        self._fifo = False  # stdin is a pipe (its buffer size can be read)
        self.newest = 0  # the newest report's length
        self._fd = -1
        # loop time -> the loop time until which steps wait (a scrape is due: ``publish.Publisher.hold``), or None
        self.hold: Callable[[float], float | None] | None = None
        # called with the loop time of the next tick when a read's lines are all counted and the next read waits
        # for that tick (``publish.Publisher.reads_paused``)
        self.paused: Callable[[float], None] | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start reading: on ``loop`` when the input can be polled, else on a daemon thread."""
        self._loop = loop
        try:
            self._fd = self.fileobj.fileno()
            loop.add_reader(self._fd, self._readable)
            self._reading = True
            self.polled = True
        except (OSError, ValueError):  # a regular file or /dev/null (EPERM), or no usable descriptor
            threading.Thread(target=self._read_blocking, name="stdin", daemon=True).start()
            return
        mode = os.fstat(self._fd).st_mode
        if (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and os.get_blocking(self._fd):
            os.set_blocking(self._fd, False)  # a terminal stays blocking: read only when it is readable
            self._nonblocking = True
        if stat.S_ISFIFO(mode):
            self._fifo = True
            with contextlib.suppress(OSError):
                self._pipe_bytes = grow_pipe(self._fd, PIPE_GROWN)

    def restore(self) -> None:
        """Give stdin back as it was handed to us (blocking), for whoever shares it after we exit."""
        if self._nonblocking:
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, True)

    @property
    def next_tick(self) -> float | None:
        """The loop time of the next tick, or None while the loop's reader is armed instead (or input ended)."""
        return None if self._timer is None else self._timer.when()

    @property
    def lines_waiting(self) -> bool:
        """Lines read are still waiting to be decoded or applied (the step under way's line not counted)."""
        return bool(self._queue) or self._report is not None

    @property
    def busy(self) -> bool:
        """Lines read are still being decoded and applied."""
        return self._stepping

    def _readable(self) -> None:
        self._read()

    def read_early(self) -> None:
        """Take the next tick's read now, in a turn the loop is awake for anyway (``HTTPFront.after_response``: a
        response was just written), when that tick is less than ``READ_EARLY`` x ``read_every`` away: at a scrape
        every 0.1 s a host-only stream's reads, counts and publications ride on the scrapes' turns instead of
        turns of their own. Reads are never further apart than the ticks (the tick stays when the pipe holds
        nothing yet); only the small-report ticks move (a large report, or lines still being applied, keep
        their path)."""
        timer = self._timer
        if timer is None or self._stepping or self.closed or self.large:
            return  # a long report's tick (``LONG_TICKS``) is kept as it is
        assert self._loop is not None
        if timer.when() - self._loop.time() > READ_EARLY * self.read_every:
            return
        got = self._drain()
        if not got and not self.closed:
            return  # nothing yet: the tick stays as it was
        timer.cancel()
        self._timer = None
        self._got = got
        self._read_taken()

    def _tick(self) -> None:
        self._timer = None
        self._read()

    def _unarm(self) -> None:
        if self._reading:
            assert self._loop is not None
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _arm(self) -> None:
        if not self._reading:
            assert self._loop is not None
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def _read(self) -> None:
        """Read what stdin holds now, then apply its lines step by step, or wait for more. The loop's reader stays
        armed while lines are applied (a report read as it arrives costs no re-arming) unless more than ``CHUNK``
        bytes of lines wait: then reading pauses until they are applied."""
        if self.closed:
            return
        self._got = self._drain()
        self._read_taken()

    def _read_taken(self) -> None:
        """Apply the lines a read queued (``_got``: the bytes it took), or wait for more."""
        if self._queue:
            if self._queued > CHUNK or self.closed:
                self._unarm()
            if not self._stepping:
                self._stepping = True
                assert self._loop is not None
                if self.large:
                    self._loop.call_later(0.0, self._step)  # a timer: runs after the requests that came meanwhile
                else:
                    self._step()  # short reports: their first step in this turn (a turn of the loop saved)
        else:
            self._wait()

    def _wait(self) -> None:
        """Wait for more input: the next tick while small reports keep coming, else the loop's reader."""
        if self.closed:
            self._unarm()
            return
        assert self._loop is not None
        if self._got and self._nonblocking and self._fifo:
            # read again before each tick: another holder of the pipe (the writer, a wrapper) may have resized it
            with contextlib.suppress(OSError):
                self._pipe_bytes = pipe_size(self._fd)
        if (
            self._got
            and self._nonblocking
            and (not self.large or self._ticks_hold())
            and self._got * PIPE_SHARE <= self._pipe_bytes
        ):
            self._unarm()
            if self._timer is None:
                every = self.read_every / LONG_TICKS if self.large else self.read_every
                self._timer = self._loop.call_later(every, self._tick)  # coalesce: see the class docstring
        else:
            self._arm()

    def _ticks_hold(self) -> bool:
        """Long reports may wait for the tick: the pipe holds ``TICK_LINES`` of them, and none is streaming in."""
        return self.lines.pending < LARGE_REPORT and self.newest * TICK_LINES <= self._pipe_bytes

    def _step(self) -> None:
        """One step: apply the report decoded last step, or decode the next line; then the next step or wait.
        While a scrape is due (``hold``) the step waits, so the loop is idle when the scrape comes."""
        assert self._loop is not None
        until = self.hold(self._loop.time()) if self.hold is not None else None
        if until is not None:
            self._loop.call_at(until, self._step)
            return
        if self._report is not None:
            report, self._report = self._report, None
            whole, self._line = self._line, None
            self.apply(report, whole)
        else:
            line = self._queue.popleft()
            if isinstance(line, bytes):
                self._queued -= len(line)
            if line is _END:
                self._queue.clear()
                self._stepping = False
                self.stream.stats.eof = True
                self.at_eof()
                return
            if line is None:
                self.stream.oversize()
            else:
                assert isinstance(line, bytes)
                text: bytes = line
                self._report, self._line = decode_line(self.stream, text)  # a long line: thin when it can be
                short = 0
                while len(text) < LARGE_REPORT:
                    # a short report (a host-only one: tens of microseconds to decode and apply) is applied in
                    # the same turn, and so are the next short lines of the read (up to SHORT_LINES_PER_TURN):
                    # a turn of the loop per report saved, and no request waits long for them
                    if self._report is not None:
                        report, self._report = self._report, None
                        self.apply(report, None)
                    short += 1
                    following = self._queue[0] if self._queue else None
                    if short >= SHORT_LINES_PER_TURN or not isinstance(following, bytes):
                        break
                    if len(following) >= LARGE_REPORT:
                        break
                    text = following
                    self._queue.popleft()
                    self._queued -= len(text)
                    self._report = self.stream.decode(text)
                del text
            line = None  # a long line is let go once parsed (unless its report is thin: its snapshot keeps it)
        if self._queue or self._report is not None:
            self._loop.call_later(0.0, self._step)  # a timer: runs after the requests that came meanwhile
        else:
            self._stepping = False
            self._wait()
            if self._timer is not None and self.paused is not None:
                self.paused(self._timer.when())  # nothing more is counted before that tick

    def _drain(self) -> int:
        """Read what stdin holds now (one read unless non-blocking) into the queue; the number of bytes read."""
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
        self.closed = True
        self._unarm()  # end of input stays readable: never wake on it again
        self._take(self.lines.finish())
        self._queue.append(_END)

    def _take(self, lines: list[bytes | None]) -> None:
        newest = next((len(line) for line in reversed(lines) if line), None)
        if newest is not None:
            self.newest = newest
            self.large = newest >= LARGE_REPORT  # the newest report tells
        if self.lines.pending >= LARGE_REPORT:
            self.large = True  # a large line is streaming in: read it as it arrives, at pipe speed, not per tick
        self._queued += sum(len(line) for line in lines if line is not None)
        self._queue.extend(lines)
        lines.clear()

    def _read_blocking(self) -> None:
        for report in self.stream:  # the same stream and counters as the polled way (decoded whole)
            self.apply(report, None)
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: the exporter is stopping anyway
            self._loop.call_soon_threadsafe(self.at_eof)
