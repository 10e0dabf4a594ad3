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

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .peak_rss import launched, peak
from .pty_terminal import on_a_terminal

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
    top = on_a_terminal(launched([*TOP, "--simulate", "trn1.2xlarge"], tmp_path / "peak"), 30000, 30000)
    killer = threading.Timer(DEADLINE * 2, top.proc.kill)  # the deadline of the wait below
    killer.start()
    try:
        top.wait_drawing(20_000, time.monotonic() + DEADLINE)  # the live view is up and drawing
        os.write(top.master, b"q")
        top.proc.wait()
    finally:
        killer.cancel()
        top.close()
    assert top.proc.returncode == 0
    rss = peak(tmp_path / "peak")  # top's own, not the test process's (tests/hostile/peak_rss.py)
    assert rss < 600 * MIB, f"top peaked at {rss / MIB:.0f} MiB for a 30000 x 30000 terminal"
