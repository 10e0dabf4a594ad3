"""Blocking and releasing the stop and reload signals around a command's start (see neuron_monitor/launch.py).

Importing this module changes nothing; `neuron_monitor.launch` calls `block` when a console script imports it, and
each long-running command calls `release` (or `interrupt_on_signals`) once its handlers are installed.
"""

from __future__ import annotations

import signal

SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


def block() -> None:
    """Hold SIGHUP, SIGINT and SIGTERM pending until `release`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def release() -> None:
    """Deliver the held signals (if any) to the handlers now installed, and every later one at once."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def interrupt_on_signals() -> None:
    """Handlers for a command without handlers of its own yet: SIGHUP, SIGINT and SIGTERM raise KeyboardInterrupt
    in the main thread (which the command catches as a clean stop); then `release`."""
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)
    release()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)
