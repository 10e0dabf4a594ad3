"""A stop signal that Python drops while neuron-monitor-top or neuron-monitor-health starts.

Both commands install `early_signals.interrupt_on_signals` first: SIGTERM, SIGINT and SIGHUP raise
KeyboardInterrupt in the main thread, which they catch as a clean stop. Handled inside a finalizer (``__del__``) or a
callback from C, that exception is printed as "Exception ignored in ..." and dropped. Before: top then went on into
its live view and health on to its verdict (up to ``--timeout``, 60 s, on a URL that does not answer). After: the
handlers also keep the signal (`early_signals.STOPPED`, which top's live view checks once its own handlers are
installed) and arm the stop's watchdog, so the command is gone within 2 s either way: top with 0, health with
its "unknown" status (2) and one line.

Each case runs the command's real ``main`` in a child process with one hook added by a small script. Conditions are
awaited with a generous deadline; no wall time is asserted.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import threading

from tests.hostile.child_script import start, wait_until_it_ends

FREED = textwrap.dedent(
    """
    import signal, sys, time

    class Freed:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)  # handled here, inside the finalizer, as it returns
            sum(range(100))
    """
)

# top reading report lines from a pipe that stays open: its live view would run until the stop
TOP = FREED + textwrap.dedent(
    """
    from neuron_monitor.top import cli

    chosen = cli.choose_source
    def choose_source(args):
        Freed()  # made and freed here: the signal lands in its finalizer while top starts
        return chosen(args)

    cli.choose_source = choose_source
    sys.exit(cli.main(["--stdin"]))
    """
)

# health whose verdict hangs after the stop (a URL that never answers, at most --timeout)
HEALTH = FREED + textwrap.dedent(
    """
    from neuron_monitor.health import cli

    def from_root(root):
        Freed()
        time.sleep(600)

    cli.from_root = from_root
    sys.exit(cli.main(["--root", "/nonexistent"]))
    """
)


def _drain(fd: int) -> None:
    """Reads the terminal's output until it closes, so the command never waits on a full terminal."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def _run(script: str, terminal: bool) -> tuple[int, str]:
    """Runs the script until it ends (stdout a pseudo-terminal when ``terminal``); (status, stderr)."""
    if not terminal:
        return wait_until_it_ends(start(script, subprocess.DEVNULL), "the command")
    master, slave = os.openpty()
    try:
        proc = start(script, slave)
        os.close(slave)
        threading.Thread(target=_drain, args=(master,), daemon=True).start()
        return wait_until_it_ends(proc, "the command")
    finally:
        os.close(master)


def test_top_stops_when_its_startup_stop_was_dropped_in_a_finalizer() -> None:
    status, err = _run(TOP, terminal=True)
    assert "Exception ignored" in err  # the KeyboardInterrupt was indeed dropped
    assert status == 0, err


def test_health_is_unknown_when_its_stop_was_dropped_and_the_verdict_hangs() -> None:
    status, err = _run(HEALTH, terminal=False)
    assert "Exception ignored" in err
    assert status == 2, err  # unknown: node-problem-detector's custom-plugin code
    assert "neuron-monitor-health: SIGTERM: stopping took over" in err
