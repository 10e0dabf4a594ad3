"""Simulation is self-contained: --simulate never touches the network, neuron-monitor-sim says where it is and how
to monitor it, and the simulator, its workers and its temporary tree go when the process that started it dies."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from neuron_monitor.sim.instance_info import SIMULATED_INSTANCE_ID
from tests.conftest import REPO, daemon_cmd
from tests.host.fake_imds import FakeImds

pytestmark = pytest.mark.e2e
DEADLINE = 60.0  # seconds a condition may take on a loaded CI machine


def _lines(stream: object) -> queue.Queue[bytes]:
    """The lines of a pipe, read in a thread (so that waiting for one has a deadline)."""
    q: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # exited, not yet reaped by its new parent
    except psutil.NoSuchProcess:
        return True


def test_simulate_fills_instance_info_from_the_shape_without_the_network() -> None:
    with FakeImds("v2") as imds:
        env = dict(os.environ, NEURON_MONITOR_IMDS_ENDPOINT=imds.endpoint)
        proc = subprocess.run(
            daemon_cmd("--simulate", "trn1.2xlarge", "--sim-runtimes", "1", "--once", "--imds-endpoint", imds.endpoint),
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert imds.requests == []  # not one request, although a metadata service was there to answer
    info = json.loads(next(line for line in proc.stdout.splitlines() if line.strip()))["instance_info"]
    assert info["instance_type"] == "trn1.2xlarge"
    assert info["instance_id"] == SIMULATED_INSTANCE_ID == "i-simulated"
    assert info["error"] == ""
    assert b"instance metadata" not in proc.stderr


def test_sim_cli_says_where_it_is_when_it_is_ready_and_how_to_monitor_it(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", "--shape", "trn1.2xlarge", "--runtimes", "1"]
    proc = subprocess.Popen([*cmd, "--root", str(root)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = _lines(proc.stdout)
        said = [lines.get(timeout=DEADLINE).decode() for _ in range(3)]
        assert said[0].startswith("neuron-monitor-sim: building a simulated trn1.2xlarge") and str(root) in said[0]
        assert said[1] == f"neuron-monitor-sim: ready: root {root}\n"
        assert (root / "sys/class/neuron_device/neuron0").is_dir()  # ready means the tree is there
        assert f"monitor it: neuron-monitor --root {root}" in said[2]
        # the printed command works
        once = subprocess.run(daemon_cmd("--root", str(root), "--once", "--no-imds"), cwd=REPO, capture_output=True,
                              timeout=120)  # fmt: skip
        assert once.returncode == 0, once.stderr
        assert json.loads(once.stdout)["neuron_hardware_info"]["neuron_device_count"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
    assert root.is_dir()  # run by hand: the tree stays for the user


def test_kill_9_of_the_daemon_takes_the_simulator_its_workers_and_its_tree() -> None:
    cmd = daemon_cmd("--simulate", "trn1.2xlarge", "--sim-runtimes", "2", "--no-imds")
    daemon = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        lines = _lines(daemon.stdout)
        line = lines.get(timeout=DEADLINE)
        while not line.strip():  # the resync newline before the first report
            line = lines.get(timeout=DEADLINE)
        report = json.loads(line)
        assert report["neuron_hardware_info"]["neuron_device_count"] == 1
        deadline = time.monotonic() + DEADLINE
        while True:  # the simulator and both its workers (the runtimes)
            family = psutil.Process(daemon.pid).children(recursive=True)
            sims = [p for p in family if "neuron_monitor.sim.cli" in p.cmdline()]
            if sims and len(family) >= 3:
                break
            assert time.monotonic() < deadline, family
            time.sleep(0.1)
        cmdline = sims[0].cmdline()
        tree = Path(cmdline[cmdline.index("--remove-on-exit") + 1])
        assert tree.is_dir()
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while not (all(_gone(p.pid) for p in family) and not tree.exists()):
            assert time.monotonic() < deadline, ([p for p in family if not _gone(p.pid)], tree.exists())
            time.sleep(0.1)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
