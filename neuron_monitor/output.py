"""The stdout writer: one report line at a time, from a dedicated thread, with back-pressure instead of buffering.

`LineWriter.write(line)` resolves when the whole line reached the file descriptor (a pipe, file or tty). At most
one line is in flight: a slow reader makes the scheduler wait (and skip collection slots, whose counts then land
in the next report), so memory stays bounded and no count is lost. A reader that went away raises `ReaderGone`.
The optional recorder gets every line first, so a recording is complete even when no one reads stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import queue
import select
import threading
import time
from typing import Protocol

log = logging.getLogger("neuron_monitor.output")


class ReaderGone(Exception):
    """The reader of stdout closed its end (EPIPE)."""


class LineSink(Protocol):
    def append(self, line: bytes) -> None: ...

    def close(self) -> None: ...


class LineWriter:
    def __init__(self, fd: int = 1, recorder: LineSink | None = None) -> None:
        self.fd = fd
        self.recorder = recorder
        self.lines_written = 0
        self.record_errors = 0
        self._last_record_log = -1e18
        self._q: queue.Queue[tuple[bytes, asyncio.Future[None], asyncio.AbstractEventLoop] | None] = queue.Queue(
            maxsize=1
        )
        self._thread = threading.Thread(target=self._run, name="stdout-writer", daemon=True)
        self._thread.start()
        self.busy = threading.Event()

    async def write(self, line: bytes) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._q.put((line, fut, loop))
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

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            line, fut, loop = item
            self.busy.set()
            try:
                self._record(line)
                self._write_all(line)
                self.lines_written += 1
            except BaseException as e:
                loop.call_soon_threadsafe(_set_exception, fut, e)
            else:
                loop.call_soon_threadsafe(_set_result, fut)
            finally:
                self.busy.clear()

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
