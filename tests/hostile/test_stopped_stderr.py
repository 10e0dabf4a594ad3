"""SIGTERM to ``neuron-monitor-prometheus`` while its stderr is a terminal whose output is stopped (Ctrl-S) and
full: the orderly stop's last line cannot be written, and neither could the watchdog's.

Before: the 1.8 s watchdog wrote its line with a blocking write before ending the process, so it waited with
everything else, for as long as the terminal stayed stopped. After: the line is written at once when stderr can take
it, else from a thread the watchdog does not wait for beyond 0.1 s; the process is gone with status 0. A real pty
(the test stops its output with tcflow and fills it); waits have generous deadlines and no time is asserted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pty
import signal
import socket
import subprocess
import sys
import termios
import time

DEADLINE = 60.0


def test_sigterm_while_stderr_is_a_stopped_full_terminal() -> None:
    master, slave = pty.openpty()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exporter = os.path.join(os.path.dirname(sys.executable), "neuron-monitor-prometheus")
    proc = subprocess.Popen(
        [exporter, "--port", str(port), "--bind", "127.0.0.1", "--verbose", "3"],
        stdin=subprocess.PIPE,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    filler = os.open(os.ttyname(slave), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        deadline = time.monotonic() + DEADLINE
        while not _listening(port):  # serving
            assert proc.poll() is None and time.monotonic() < deadline, proc.poll()
            time.sleep(0.05)
        termios.tcflow(slave, termios.TCOOFF)  # the terminal stops output
        while True:  # and its buffer fills: the next write from the exporter waits
            try:
                os.write(filler, b"x" * 512)
            except BlockingIOError:
                break
            assert time.monotonic() < deadline
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {DEADLINE} s after SIGTERM (stderr stopped)") from None
        assert code == 0
    finally:
        with contextlib.suppress(OSError):
            termios.tcflow(slave, termios.TCOON)
        proc.kill()
        proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        for fd in (filler, slave, master):
            os.close(fd)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError as e:
        assert e.errno in (errno.ECONNREFUSED, errno.ETIMEDOUT, None), e
        return False
