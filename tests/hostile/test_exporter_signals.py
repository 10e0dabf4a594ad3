"""Stop signals against the serving Prometheus exporter, where the signal lands in an awkward place.

Before: the exporter's handlers raised ``SystemExit`` in whatever Python code the main thread ran when the signal
was handled. When that code was a finalizer (``__del__``, such as a transport's, freed after a failed TLS handshake)
or a callback OpenSSL makes (the SNI callback), Python prints "Exception ignored in ..." and drops the exception:
the stop was lost and the process served on until SIGKILL. A CI run saw test_prom_cli's TLS test find its exporter
still running 10 s after SIGTERM, sent right after a client's failed handshake: the likely cause.
After: while serving, the handlers only wake the loop (``loop.add_signal_handler``: the signal's number goes
through a wakeup descriptor, whatever thread the kernel hands it to), the loop stops in its own turn, and a
watchdog ends the process with status 0 when the orderly stop takes longer than ``STOP_DEADLINE_SECONDS``. While
it starts, a stop signal still raises (there is no loop yet), and is also kept: one lost in a finalizer then stops
the exporter as soon as it serves.

Each case runs the exporter's real ``main`` in a child process with one hook added by a small script. Conditions are
awaited with a generous deadline; no wall time is asserted.
"""

from __future__ import annotations

import textwrap

from tests.hostile.child_script import start, wait_until_it_ends

# the exporter's main, with `hook(loop)` called on the loop once it serves (from the `ready` step, through quiet_gc)
RUN = textwrap.dedent(
    """
    import asyncio, signal, sys, time
    from neuron_monitor.exporters.prometheus import cli, server

    def serving(hook):
        frozen = cli.quiet_gc
        def quiet_gc():
            frozen()
            loop = asyncio.get_event_loop()
            loop.call_later(0.2, hook, loop)
            print("serving", file=sys.stderr, flush=True)
        cli.quiet_gc = quiet_gc

    def finish():
        sys.exit(cli.main(["--bind", "127.0.0.1", "--port", "0"]))
    """
)

IN_A_FINALIZER = RUN + textwrap.dedent(
    """
    class Freed:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)  # handled here, inside the finalizer, as it returns
            sum(range(100))

    serving(lambda loop: Freed())  # made and freed in one loop callback: its finalizer runs there
    finish()
    """
)

WHILE_STARTING_IN_A_FINALIZER = RUN + textwrap.dedent(
    """
    class Freed:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)  # handled here, while the exporter is still starting
            sum(range(100))

    collectors = cli.runtime_collectors
    def runtime_collectors():
        Freed()
        return collectors()

    cli.runtime_collectors = runtime_collectors
    serving(lambda loop: None)
    finish()
    """
)

STOP_STALLS = RUN + textwrap.dedent(
    """
    def stall(self):
        time.sleep(600)  # the orderly stop never finishes (a stuck close)

    server.HTTPFront._close_all = stall
    serving(lambda loop: signal.raise_signal(signal.SIGTERM))
    finish()
    """
)


def _run(script: str) -> tuple[int, str]:
    return wait_until_it_ends(start(script), "the exporter")


def test_a_stop_signal_handled_inside_a_finalizer_is_not_lost() -> None:
    status, err = _run(IN_A_FINALIZER)
    assert "serving" in err
    assert status == 0, err
    assert "stopped by SIGTERM" in err
    assert "Exception ignored" not in err


def test_a_stop_signal_lost_in_a_finalizer_while_starting_stops_it_once_it_serves() -> None:
    status, err = _run(WHILE_STARTING_IN_A_FINALIZER)
    assert "serving" in err
    assert status == 0, err
    assert "stopped by SIGTERM" in err


def test_a_stalled_stop_ends_at_the_watchdog() -> None:
    status, err = _run(STOP_STALLS)
    assert "serving" in err
    assert status == 0, err
    assert "SIGTERM: stopping took over" in err
