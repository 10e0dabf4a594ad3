"""Blocking and releasing the stop and reload signals around a command's start (see neuron_monitor/launch.py).

Importing this module changes nothing; `neuron_monitor.launch` calls `block` when a console script imports it, and
each long-running command calls `release` (or `interrupt_on_signals`) once its handlers are installed.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuron_monitor.util.stopping import StopDeadline

SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
# The stop signals `interrupt_on_signals`' handlers took, in order. Raised inside a finalizer or a callback from C,
# their KeyboardInterrupt is dropped by Python ("Exception ignored in ..."): a command also checks this list once
# its own handlers are installed, and the watchdog armed with the first one ends the process in any case.
STOPPED: list[str] = []
_deadline: list[StopDeadline] = []  # the watchdog the handlers arm (one per process)


def block() -> None:
    """Hold SIGHUP, SIGINT and SIGTERM pending until `release`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def release() -> None:
    """Deliver the held signals (if any) to the handlers now installed, and every later one at once."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def interrupt_on_signals(prog: str, status: int = 0) -> None:
    """Handlers for a command without handlers of its own yet: SIGHUP, SIGINT and SIGTERM raise KeyboardInterrupt
    in the main thread (which the command catches as a clean stop), are kept in `STOPPED`, and the first arms
    the stop's watchdog (`StopDeadline`: ``prog`` is gone with ``status`` within 2 s, even when the
    KeyboardInterrupt was lost); then `release`."""
    from neuron_monitor.util.stopping import StopDeadline

    _deadline[:] = [StopDeadline(prog, status=status)]
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)
    release()


def _interrupt(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    STOPPED.append(name)
    for deadline in _deadline:
        deadline.arm(name)
    raise KeyboardInterrupt(name)
