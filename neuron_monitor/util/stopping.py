"""The stop flag of a command that reads reports until a signal or the end of its input (neuron-monitor-otlp,
neuron-monitor-taint). Imports only ``signal`` and ``threading``, so a command installs it before its other imports.
"""

from __future__ import annotations

import signal
import threading


class Stopped(BaseException):
    """Raised in the main thread by a signal once the command runs, when it asked for that (``interrupt``): it leaves
    any call in progress at once (an API call that would hang)."""


class Stop:
    """Set by SIGTERM/SIGINT/SIGHUP or by the end of input. Until ``running`` (start-up: imports, credentials, which
    may wait on the network) a signal ends the process at once with 0; afterwards it sets ``event`` for the orderly
    stop, and with ``interrupt`` also raises `Stopped` in the main thread."""

    def __init__(self, interrupt: bool = False) -> None:
        self.event = threading.Event()
        self.signal_name = ""
        self.running = False
        self.interrupt = interrupt

    def on_signal(self, signum: int, _frame: object) -> None:
        if not self.signal_name:
            self.signal_name = signal.Signals(signum).name
        self.event.set()
        if not self.running:
            raise SystemExit(0)
        if self.interrupt:
            raise Stopped()

    def install(self) -> None:
        """This flag handles SIGTERM, SIGINT and SIGHUP."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.on_signal)
