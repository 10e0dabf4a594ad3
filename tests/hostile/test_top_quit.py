"""Quitting neuron-monitor-top while the pipe that feeds it is still open ends it cleanly (exit 0).

Before (issue 32): `neuron-monitor | neuron-monitor-top` and q aborted with exit 134, "Fatal Python error ...
could not acquire lock for <_io.BufferedReader name='<stdin>'> at interpreter shutdown, possibly due to daemon
threads": the reader thread waited inside sys.stdin's buffered object. After: the reader uses os.read on the
descriptor, holding no lock. In a real terminal (tmux); the feeding pipe stays open past the quit.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.top.test_terminal import DEADLINE, REPORTS, Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test-tools installs it)"),
]
REPORT = REPORTS / "cwagent-test_trn1n32xl_report_line.json"


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Callable[[], Tmux]]:
    made: list[Tmux] = []

    def make() -> Tmux:
        t = Tmux(tmp_path, 120, 40)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def fed_top(feed: str, status: Path) -> str:
    """A shell command: neuron-monitor-top fed by ``feed``; its pid goes to ``status``.pid, its exit status to
    ``status``."""
    top = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "neuron_monitor.top.cli"])
    pid_file = shlex.quote(f"{status}.pid")
    run = shlex.quote(f"echo $$ > {pid_file}; exec {top}")
    return f"{feed} | (sh -c {run}; echo $? > {shlex.quote(str(status))})"


def start_fed_top(t: Tmux, status: Path, lines: int) -> None:
    """neuron-monitor-top fed by a pipe that stays open for 10 minutes."""
    feed = f"(for i in $(seq {lines}); do cat {shlex.quote(str(REPORT))}; echo; done; exec sleep 600)"
    t.start(fed_top(feed, status))
    t.wait_for("neuron-monitor-top", "trn1n.32xlarge")


def exit_status(status: Path) -> int:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        text = status.read_text().strip() if status.exists() else ""
        if text:
            return int(text)
        time.sleep(0.1)
    raise AssertionError("neuron-monitor-top did not exit")


@pytest.mark.parametrize("lines", [1, 40])
def test_q_with_the_pipe_open_exits_0(term: Callable[[], Tmux], tmp_path: Path, lines: int) -> None:
    t = term()
    status = tmp_path / "status"
    start_fed_top(t, status, lines)
    t.keys("q")
    assert exit_status(status) == 0
    assert "Fatal Python error" not in t.screen()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_with_the_pipe_open_exits_0(term: Callable[[], Tmux], tmp_path: Path, sig: signal.Signals) -> None:
    t = term()
    status = tmp_path / "status"
    start_fed_top(t, status, 1)
    os.kill(int(Path(f"{status}.pid").read_text()), sig)
    assert exit_status(status) == 0
    assert "Fatal Python error" not in t.screen()


def test_q_in_the_middle_of_a_long_line_exits_0(term: Callable[[], Tmux], tmp_path: Path) -> None:
    """Quitting while the reader waits inside a line (a writer stalled half-way) also exits 0."""
    t = term()
    status = tmp_path / "status"
    feed = f"(cat {shlex.quote(str(REPORT))}; echo; head -c 100000 {shlex.quote(str(REPORT))}; exec sleep 600)"
    t.start(fed_top(feed, status))
    t.wait_for("neuron-monitor-top", "trn1n.32xlarge")
    t.keys("q")
    assert exit_status(status) == 0
