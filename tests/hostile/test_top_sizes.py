"""Sizes neuron-monitor-top is given: ``COLUMNS`` from the shell, ``--width``/``--height``, a terminal's own size.

Before: ``COLUMNS=abc`` (or a number past 2^63) ended ``neuron-monitor-top --once`` with a traceback
(ValueError, OverflowError), ``COLUMNS=-5`` drew a broken snapshot, ``--width 999999999`` took 8.8 GB and 32 s,
``--height 99999999999`` ended in MemoryError, and the live view on a pseudo-terminal that reports 60000 x 60000
cells took 13.8 GB before its first frame (every frame is laid out cell by cell). After: a layout is at most
4096 x 4096 cells (``top/layout.MAX_COLUMNS``, ``MAX_ROWS``); ``--width``/``--height`` past that are exit 2 with
one line; a ``COLUMNS`` that is not a whole number from 1 to 4096 is ignored with one line on stderr (as ``ls``
does); a terminal reporting more is drawn at 4096 x 4096 (31 MB peak).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from .peak_rss import launched, peak

DEADLINE = 90.0
TOP = [sys.executable, "-m", "neuron_monitor.top.cli"]
MIB = 1024 * 1024


def _once(*args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [*TOP, "--simulate", "trn1.2xlarge", "--once", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("columns", ["abc", "-5", "99999999999999999999", "10000", "8O"])
def test_a_columns_variable_that_is_no_width_is_ignored_with_one_line(columns: str) -> None:
    p = _once(columns=columns)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert f"ignoring COLUMNS='{columns}'" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    first = p.stdout.splitlines()[0]
    assert first.startswith("neuron-monitor-top") and len(first) == 120  # the default width


def test_a_columns_variable_in_range_sets_the_width() -> None:
    p = _once(columns="80")
    assert p.returncode == 0 and p.stderr == ""
    assert len(p.stdout.splitlines()[0]) == 80


@pytest.mark.parametrize(
    ("flag", "value"), [("--width", "4097"), ("--width", "99999999999999999999"), ("--height", "99999999999")]
)
def test_a_width_or_height_past_the_layouts_cap_is_exit_2_with_one_line(flag: str, value: str) -> None:
    p = _once(flag, value)
    assert p.returncode == 2
    assert p.stderr.strip() == f"neuron-monitor-top: argument {flag}: at most 4096, got {value} (see --help)"


def test_a_terminal_reporting_a_huge_size_is_drawn_at_the_cap(tmp_path: Path) -> None:
    """A pseudo-terminal that says it has 30000 x 30000 cells: the live view draws (at 4096 x 4096), quits on q
    with exit 0, and its peak RSS stays far below a frame of the reported size."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30000, 30000, 0, 0))
    proc = subprocess.Popen(
        launched([*TOP, "--simulate", "trn1.2xlarge"], tmp_path / "peak"),
        preexec_fn=lambda: os.login_tty(slave),
        close_fds=True,
    )
    os.close(slave)
    shown = [0]

    def terminal() -> None:  # reads what top draws, as a terminal does, until top is gone
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            shown[0] += len(data)

    threading.Thread(target=terminal, daemon=True).start()
    killer = threading.Timer(DEADLINE * 2, proc.kill)  # the deadline of the wait below
    killer.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while shown[0] < 20_000:  # the live view is up and drawing
            assert proc.poll() is None and time.monotonic() < deadline, (proc.poll(), shown[0])
            time.sleep(0.05)
        os.write(master, b"q")
        proc.wait()
    finally:
        killer.cancel()
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0
    rss = peak(tmp_path / "peak")  # top's own, not the test process's (tests/hostile/peak_rss.py)
    assert rss < 600 * MIB, f"top peaked at {rss / MIB:.0f} MiB for a 30000 x 30000 terminal"
