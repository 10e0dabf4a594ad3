"""The stdout writer: one report line at a time, from a dedicated thread, with back-pressure instead of buffering.

`LineWriter.write(line)` resolves when the whole line reached the file descriptor (a pipe, file or tty);
`write_now(line)` writes it at once when that cannot block and says whether it did (the scheduler's timer writes
its reports so, without a coroutine). At most
one line is in flight: a slow reader makes the scheduler wait (and skip collection slots, whose counts then land
in the next report), so memory stays bounded and no count is lost. A reader that went away raises `ReaderGone`.
The optional recorder gets every line first, so a recording is complete even when no one reads stdout.

A write that cannot block (stdout is a pipe with room for the whole line, or a regular file, or /dev/null) is
done at once on the caller's thread; anything else goes through the writer thread, so a full pipe or a stopped
terminal never stalls the event loop. The direct path saves a thread hand-off per report.

Room in a pipe is counted in pages, not bytes: Linux's pipe is a ring of page-sized slots and a write that does not
fit in the last slot's free space takes new slots, so 16 unread 3 KB lines fill a 64 KiB pipe holding 48 KB. The
direct path therefore bounds the slots the unread bytes can occupy by the lines this writer sent (each line at most
ceil(size / page) slots) and writes directly only when the new line's slots are surely free; otherwise the writer
thread waits, and the event loop (signals included) keeps running.

A pipe whose buffer is smaller than four report lines (Linux's default is 64 KiB; a trn2.48xlarge report with 16
runtimes is about 80 KB) is grown once with F_SETPIPE_SZ, up to /proc/sys/fs/pipe-max-size (1 MiB by default,
no privilege needed), so that whole reports fit and go out directly. This buffers at most a few reports in the
kernel, never in this process; when growing is refused, lines that do not fit take the writer thread as before.
A pipe is never shrunk: its size is read again before growing it, since the reader may have grown it meanwhile
(neuron-monitor-prometheus grows its stdin to 1 MiB and sizes its reads by that).

Resync: the first line written starts with a newline. A daemon killed mid-write (kill -9, OOM) leaves a torn line
in the pipe or file that a restarted daemon writes to; without the newline the restarted daemon's first report
would be glued to it and lost with it. Readers skip empty lines (schema/stream.py does; AWS's own
neuron-monitor-prometheus.py logs one "Unable to decode JSON" and goes on). The recording gets the plain lines.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import fcntl
import logging
import os
import queue
import select
import stat
import struct
import termios
import threading
import time
from typing import Protocol

from neuron_monitor.util.pipes import grow_pipe, pipe_size

log = logging.getLogger("neuron_monitor.daemon.output")

PIPE_LINES = 4  # grow a pipe to hold this many lines
_DEV_NULL = os.makedev(1, 3)
PAGE = os.sysconf("SC_PAGESIZE")  # a pipe buffer slot
SENT_TRACKED = 64  # recent lines remembered to bound the slots unread bytes occupy


def _slots(n: int) -> int:
    """Most pipe slots a write of n bytes can take."""
    return -(-n // PAGE)


def _fd_kind(fd: int) -> str:
    """ "pipe", "file" (never blocks on write) or "other" (tty, socket, ...)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return "other"
    if stat.S_ISFIFO(st.st_mode):
        return "pipe"
    if stat.S_ISREG(st.st_mode) or (stat.S_ISCHR(st.st_mode) and st.st_rdev == _DEV_NULL):
        return "file"
    return "other"


class ReaderGone(Exception):
    """The reader of stdout closed its end (EPIPE)."""


class LineSink(Protocol):
    def append(self, line: bytes) -> None: ...

    def close(self) -> None: ...


class LineWriter:
    def __init__(self, fd: int = 1, recorder: LineSink | None = None) -> None:
        self.fd = fd
        self.recorder = recorder
        self.record_errors = 0
        self._last_record_log = -1e18
        self._q: queue.Queue[tuple[bytes, bytes, asyncio.Future[None], asyncio.AbstractEventLoop] | None] = queue.Queue(
            maxsize=1
        )
        self._thread = threading.Thread(target=self._run, name="stdout-writer", daemon=True)
        self._thread.start()
        self._kind = _fd_kind(fd)
        self._capacity = 0  # the pipe's buffer size, read once and again before growing it (the reader may too)
        self._grown_for = 0  # the longest line growing the pipe was tried for
        self.direct_writes = 0
        self._sent: collections.deque[int] = collections.deque(maxlen=SENT_TRACKED)  # sizes of recent lines
        self._fresh_line = b"\n"  # written before the first line only (see Resync above)

    def _grow_pipe(self, n: int) -> None:
        """Try once per new longest line to make the pipe hold PIPE_LINES lines of n bytes (never shrinking it: the
        reader may have grown it meanwhile; our exporter grows its stdin)."""
        self._grown_for = n
        try:
            before = pipe_size(self.fd)
            self._capacity = grow_pipe(self.fd, PIPE_LINES * n)
        except OSError:
            return
        if self._capacity > before:
            log.info("grew the stdout pipe to %d bytes for %d-byte reports", self._capacity, n)
        elif self._capacity < PIPE_LINES * n:
            log.info(
                "the stdout pipe holds %d bytes, fewer than %d reports of %d bytes (pipe-max-size, or growing it was"
                " refused): long reports go through the writer thread",
                self._capacity,
                PIPE_LINES,
                n,
            )

    def _room_for(self, n: int) -> bool:
        """True when writing n bytes now cannot block."""
        if self._kind == "file":
            return True
        if self._kind != "pipe":
            return False
        try:
            if not self._capacity:
                self._capacity = pipe_size(self.fd)
            if n * PIPE_LINES > self._capacity and n > self._grown_for:
                self._grow_pipe(n)
            unread = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            self._kind = "other"
            return False
        return self._capacity // PAGE - self._slots_unread(unread) >= _slots(n)

    def _slots_unread(self, unread: int) -> int:
        """At most how many pipe slots ``unread`` bytes occupy: those of the newest lines that hold them (a line
        partly read still holds its slots). More unread bytes than the tracked lines hold: assume all slots."""
        if unread <= 0:  # the reader kept up (the usual case)
            return 0
        covered = slots = 0
        for size in reversed(self._sent):
            if covered >= unread:
                return slots
            covered += size
            slots += _slots(size)
        return slots if covered >= unread else self._capacity // PAGE

    def write_now(self, line: bytes) -> bool:
        """Write ``line`` at once on the caller's thread if that cannot block (the direct path above): True when
        written; False when nothing was written and the line must go through `write`."""
        out = self._fresh_line + line if self._fresh_line else line
        if self.recorder is not None or not self._room_for(len(out)):
            return False
        self._write_all(out)
        self._fresh_line = b""
        self.direct_writes += 1
        return True

    async def write(self, line: bytes) -> None:
        if self.write_now(line):
            return
        out = line
        if self._fresh_line:
            out, self._fresh_line = self._fresh_line + line, b""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._q.put((line, out, fut, loop))
        await fut

    def _record(self, line: bytes) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.append(line)
        except OSError as e:
            self.record_errors += 1
            now = time.monotonic()
            if now - self._last_record_log >= 60.0:
                log.error("recording failed (%d so far), reports still go to stdout: %s", self.record_errors, e)
                self._last_record_log = now

    def _write_all(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:  # someone made our stdout non-blocking: wait until writable
                select.select([], [self.fd], [])
                continue
            except BrokenPipeError:
                raise ReaderGone() from None
            except OSError as e:
                if e.errno == errno.EPIPE:
                    raise ReaderGone() from None
                raise
            view = view[n:]
        self._sent.append(len(line))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            line, out, fut, loop = item
            try:
                self._record(line)
                self._write_all(out)
            except BaseException as e:
                loop.call_soon_threadsafe(_set_exception, fut, e)
            else:
                loop.call_soon_threadsafe(_set_result, fut)

    def close(self) -> None:
        with contextlib.suppress(queue.Full):
            self._q.put_nowait(None)
        if self.recorder is not None:
            try:
                self.recorder.close()
            except OSError as e:
                log.error("closing the recording failed: %s", e)


def _set_result(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _set_exception(fut: asyncio.Future[None], e: BaseException) -> None:
    if not fut.done():
        fut.set_exception(e)
