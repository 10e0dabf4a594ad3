"""Blocking and releasing the stop and reload signals around a command's start (see neuron_monitor/launch.py).

Importing this module changes nothing; `neuron_monitor.launch` calls `block` when a console script imports it, and
each long-running command calls `release` (or `stop_on_signals`) once its handlers are installed.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuron_monitor.util.stopping import StopDeadline

SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
# The stop signals `stop_on_signals`' handlers took, in order. Raised inside a finalizer or a callback from C, their
# exception is dropped by Python ("Exception ignored in ..."): a command also checks this list once its own
# handlers are installed (and the watchdog, when one was armed with the first, ends the process in any case).
STOPPED: list[str] = []
_raising: list[type[BaseException]] = [KeyboardInterrupt]  # what the handlers raise (one kind per process)
_deadline: list[StopDeadline] = []  # the watchdog the handlers arm, if any (one per process)


def block() -> None:
    """Hold SIGHUP, SIGINT and SIGTERM pending until `release`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def release() -> None:
    """Deliver the held signals (if any) to the handlers now installed, and every later one at once."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def stop_on_signals(raising: type[BaseException], deadline: StopDeadline | None = None) -> None:
    """Handlers for a command without handlers of its own yet: SIGHUP, SIGINT and SIGTERM raise ``raising`` (the
    signal's name as its argument) in the main thread, which the command catches as a clean stop, are kept in
    `STOPPED`, and the first arms ``deadline`` when given (the stop's watchdog: the process is gone within 2 s,
    even when the exception was lost); then `release`."""
    _raising[:] = [raising]
    _deadline[:] = [deadline] if deadline is not None else []
    for signum in SIGNALS:
        signal.signal(signum, _stop)
    release()


def interrupt_on_signals(prog: str, status: int = 0) -> None:
    """`stop_on_signals` raising KeyboardInterrupt, with the watchdog armed: ``prog`` is gone with ``status``."""
    from neuron_monitor.util.stopping import StopDeadline

    stop_on_signals(KeyboardInterrupt, StopDeadline(prog, status=status))


def _stop(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    STOPPED.append(name)
    for deadline in _deadline:
        deadline.arm(name)
    raise _raising[0](name)
