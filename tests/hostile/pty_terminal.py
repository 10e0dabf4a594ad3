"""A command on a new pseudo-terminal of a given size, with this test as its terminal: a thread reads what the
command draws, as a terminal does, until the command is gone. For the live ``neuron-monitor-top`` tests that need
a real terminal (its reported size, Ctrl-S), not tmux's."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass, field


@dataclass
class PtyCommand:
    """The running command, the terminal's master side (write keys to it) and the bytes drawn so far."""

    proc: subprocess.Popen[bytes]
    master: int
    drawn: list[int] = field(default_factory=lambda: [0])

    def wait_drawing(self, at_least: int, deadline: float) -> None:
        """Until the command has drawn ``at_least`` bytes (its live view is up); fails if it ends or the monotonic
        ``deadline`` passes first."""
        while self.drawn[0] < at_least:
            assert self.proc.poll() is None and time.monotonic() < deadline, (self.proc.poll(), self.drawn[0])
            time.sleep(0.05)

    def close(self) -> None:
        """Kill the command if it still runs, reap it and close the terminal."""
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def on_a_terminal(cmd: list[str], rows: int, cols: int) -> PtyCommand:
    """Start ``cmd`` with a new pseudo-terminal of ``rows`` x ``cols`` as its controlling terminal and stdio."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(cmd, preexec_fn=lambda: os.login_tty(slave), close_fds=True)
    os.close(slave)
    run = PtyCommand(proc, master)

    def terminal() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            run.drawn[0] += len(data)

    threading.Thread(target=terminal, daemon=True).start()
    return run
