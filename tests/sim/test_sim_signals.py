"""Stopping the simulator: SIGTERM ends ``neuron-monitor-sim`` at any ``--step``; ``neuron-monitor --simulate``
survives repeated signals during its teardown (a second Ctrl-C, a process group signalled twice) with exit 0, no
traceback, and no tree or process left behind; the tree goes to tmpfs when there is one, and the daemon says where.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from neuron_monitor.sim.temporary import TREE_DIR_ENV, tree_parent
from tests.conftest import REPO, daemon_cmd

DEADLINE = 60.0  # for a loaded CI machine; the simulator checks for a stop every 0.1 s


def _wait_for_line(stream: object, pattern: str, deadline: float) -> str:
    assert hasattr(stream, "readline")
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            raise AssertionError(f"stream ended before {pattern!r}")
        text = line.decode() if isinstance(line, bytes) else line
        if re.search(pattern, text):
            return text
    raise AssertionError(f"no {pattern!r} in time")


def test_sim_obeys_sigterm_whatever_the_step(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", "--shape", "trn1.2xlarge", "--root", str(root)]
    proc = subprocess.Popen([*cmd, "--step", "1000"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_line(proc.stdout, r"^neuron-monitor-sim: ready", time.monotonic() + DEADLINE)
        time.sleep(0.3)  # inside the 1000 s step's sleep
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tree_parent_prefers_the_env_then_tmpfs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(TREE_DIR_ENV, str(tmp_path))
    assert tree_parent() == str(tmp_path)
    monkeypatch.delenv(TREE_DIR_ENV)
    shm = Path("/dev/shm")
    usable = shm.is_dir() and os.access(shm, os.W_OK | os.X_OK)
    assert tree_parent() == ("/dev/shm" if usable and psutil.disk_usage("/dev/shm").free > 512 << 20 else None)


def _family(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.e2e
@pytest.mark.parametrize("signals", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGTERM)])
def test_repeated_signals_during_teardown_leave_nothing_behind(
    tmp_path: Path, signals: tuple[signal.Signals, signal.Signals]
) -> None:
    """As a terminal's Ctrl-C pressed twice, or ``timeout`` (which signals the whole process group): every process
    of the group gets each signal, the second while the daemon tears the simulator down."""
    env = {**os.environ, TREE_DIR_ENV: str(tmp_path)}
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "1s"}')
    cmd = daemon_cmd("-c", str(conf), "--simulate", "trn1.2xlarge", "--sim-runtimes", "2", "--verbose", "info")
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + DEADLINE
        where = _wait_for_line(proc.stderr, r"building a simulated trn1\.2xlarge in ", deadline)
        tree = Path(where.split(" in ", 1)[1].split()[0])
        assert tree.parent == tmp_path
        assert proc.stdout is not None and proc.stdout.readline()  # the first report: it runs
        family = _family(proc.pid)
        assert family, "the simulator and its workers"
        os.killpg(proc.pid, signals[0])
        time.sleep(0.05)
        os.killpg(proc.pid, signals[1])
        assert proc.wait(DEADLINE) == 0
        err = proc.stderr.read().decode()
        assert "Traceback" not in err and "Event loop is closed" not in err, err
        deadline = time.monotonic() + DEADLINE
        while tree.exists() or any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family):
            assert time.monotonic() < deadline, (tree.exists(), family)
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
