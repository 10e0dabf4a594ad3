"""The console scripts of the long-running commands: their signals are blocked before anything else is imported
(the functions: neuron_monitor/util/early_signals.py).

A command's own handlers can only be installed once its modules are imported, which takes a few hundred
milliseconds (asyncio, pydantic, boto3, rich). A SIGHUP, SIGTERM or SIGINT arriving meanwhile took the default
action: ``systemctl reload`` right after ``systemctl start`` killed the daemon with status 129 and no message
(issue 39.2). So each entry point here is a module that imports only ``signal``: importing it blocks the three
signals (``pthread_sigmask``), and the command's ``main`` calls `release` as soon as its handlers are in place
(first thing in ``main``, before any child process is started, so children start with nothing blocked). A signal
that arrived while blocked is pending, and is delivered to those handlers when `release` unblocks it: nothing is
lost, nothing takes the default action. ``python -m <module>`` (the tests, the image entrypoint script) runs the
same ``main``; `release` there only unblocks what was not blocked.

What is left: the interpreter's own start, before this module's first line (tens of milliseconds, no
neuron_monitor code imported yet), where a signal still takes its default action; under systemd the daemon's unit
is Type=notify and READY=1 comes after its handlers (daemon/sdnotify.py), so systemd sends no reload before.
"""

from __future__ import annotations

from neuron_monitor.util.early_signals import block
from neuron_monitor.util.fdlimit import raise_open_file_limit

block()  # at import: the console script imports this module before anything of the command
raise_open_file_limit()  # soft RLIMIT_NOFILE to the hard limit, as Go's runtime does (util/fdlimit.py)


def daemon() -> int:
    from neuron_monitor.daemon.cli import main

    return main()


def sim() -> int:
    from neuron_monitor.sim.cli import main

    return main()


def prometheus() -> int:
    from neuron_monitor.exporters.prometheus.cli import main

    return main()


def cloudwatch() -> int:
    from neuron_monitor.exporters.cloudwatch.cli import main

    return main()


def otlp() -> int:
    from neuron_monitor.exporters.otlp.cli import main

    return main()


def top() -> int:
    from neuron_monitor.top.cli import main

    return main()


def health() -> int:
    from neuron_monitor.health.cli import main

    return main()


def taint() -> int:
    from neuron_monitor.taint.cli import main

    return main()


def entrypoint() -> int:
    from neuron_monitor.daemon.entrypoint import main

    return main()


if __name__ == "__main__":  # python -m neuron_monitor.launch entrypoint ARGS... (the image's entrypoint.sh)
    import sys

    _commands = {"entrypoint": entrypoint, "daemon": daemon}
    if len(sys.argv) < 2 or sys.argv[1] not in _commands:
        sys.stderr.write(f"usage: python -m neuron_monitor.launch {{{'|'.join(_commands)}}} ARGS...\n")
        sys.exit(2)
    _run = _commands[sys.argv[1]]
    del sys.argv[1]
    sys.exit(_run())
