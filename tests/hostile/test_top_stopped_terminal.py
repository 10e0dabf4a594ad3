"""SIGTERM to the live ``neuron-monitor-top`` while its terminal's output is stopped (Ctrl-S, XOFF): a frame's write
waits in the kernel until output resumes.

Before: the loop's signal handlers restart an interrupted write (SA_RESTART), so the stop waited with it, for as
long as the terminal stayed stopped (here: until the test sent Ctrl-Q). After: a plain handler that interrupts the
write arms the 1.8 s stop watchdog; top is gone with status 0. A real pty (this test is the terminal: it reads
what top draws, then types Ctrl-S); waits have generous deadlines and no time is asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .pty_terminal import on_a_terminal

DEADLINE = 60.0


def test_sigterm_while_the_terminal_output_is_stopped() -> None:
    top = on_a_terminal([os.path.join(os.path.dirname(sys.executable), "neuron-monitor-top"), "--simulate",
                         "trn2.48xlarge"], 50, 200)  # fmt: skip
    proc, master = top.proc, top.master
    try:
        deadline = time.monotonic() + DEADLINE
        top.wait_drawing(20_000, deadline)  # the live view is up and drawing
        os.write(master, b"\x13")  # Ctrl-S: the terminal stops output
        while _wchan(proc.pid) not in ("wait_woken", "n_tty_write"):  # a frame's write waits for the terminal
            assert proc.poll() is None and time.monotonic() < deadline, _wchan(proc.pid)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {DEADLINE} s after SIGTERM (output stopped)") from None
        assert code == 0
    finally:
        os.write(master, b"\x11")  # Ctrl-Q: output resumes (what let the old top end)
        top.close()


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read()
    except OSError:
        return ""
