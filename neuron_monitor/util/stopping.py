"""The stop flag of a command that reads reports until a signal or the end of its input (neuron-monitor-otlp,
neuron-monitor-taint), and the stop deadline of every long-running command. Imports only the standard library's
``contextlib``, ``os``, ``select``, ``signal`` and ``threading``, so a command installs it before its other imports.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading

STOP_DEADLINE_SECONDS = 1.8  # after SIGTERM/SIGINT a command is gone by then, orderly or not


class Stopped(BaseException):
    """Raised in the main thread by a signal once the command runs, when it asked for that (``interrupt``): it leaves
    any call in progress at once (an API call that would hang)."""


class Stop:
    """Set by SIGTERM/SIGINT/SIGHUP or by the end of input. Until ``running`` (start-up: imports, credentials, which
    may wait on the network) a signal ends the process at once with 0; afterwards it sets ``event`` for the orderly
    stop, and with ``interrupt`` also raises `Stopped` in the main thread. With a ``deadline``, the first signal
    arms it: the process is gone within its seconds even when the exception raised here is dropped (inside a
    finalizer, Python prints "Exception ignored in ..." and goes on) and the call in progress hangs."""

    def __init__(self, interrupt: bool = False, deadline: StopDeadline | None = None) -> None:
        self.event = threading.Event()
        self.signal_name = ""
        self.running = False
        self.interrupt = interrupt
        self.deadline = deadline

    def on_signal(self, signum: int, _frame: object) -> None:
        if not self.signal_name:
            self.signal_name = signal.Signals(signum).name
        self.event.set()
        if self.deadline is not None:
            self.deadline.arm(self.signal_name)
        if not self.running:
            raise SystemExit(0)
        if self.interrupt:
            raise Stopped()

    def install(self) -> None:
        """This flag handles SIGTERM, SIGINT and SIGHUP."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.on_signal)


class StopDeadline:
    """The watchdog of an orderly stop. ``arm`` (at the first stop signal) starts a daemon timer; when the stop has
    not ended the process ``seconds`` later (a call that hangs, a close that never returns), the timer writes one
    line to stderr and ends the process with ``status`` (0 unless told). ``cancel`` when the orderly stop finished
    but the process may rightly take longer (a child being cleaned up)."""

    def __init__(self, prog: str, seconds: float = STOP_DEADLINE_SECONDS, status: int = 0) -> None:
        self.prog = prog
        self.seconds = seconds
        self.status = status
        self._timer: threading.Timer | None = None

    def arm(self, signal_name: str) -> None:
        """Start the timer (once: a second signal does not move the deadline)."""
        if self._timer is None:
            self._timer = threading.Timer(self.seconds, self._expired, (signal_name,))
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expired(self, signal_name: str) -> None:
        line = f"{self.prog}: {signal_name}: stopping took over {self.seconds} s; exiting now\n"
        # stderr may be a terminal whose output is stopped (Ctrl-S), the very thing that may have held the stop: a
        # write that cannot go out at once is left to a thread of its own, and the process ends either way
        if _writable(2):
            _write_stderr(line.encode())
        else:
            writer = threading.Thread(target=_write_stderr, args=(line.encode(),), daemon=True)
            writer.start()
            writer.join(0.1)
        os._exit(self.status)


def _writable(fd: int) -> bool:
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):
        return False


def _write_stderr(data: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(2, data)
