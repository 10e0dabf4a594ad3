"""The simulator is a shipped command too (issue 39.9): bad arguments are one line and exit 2, the documented
ones work, and a simulated device file shrinking under the daemon can never fault it.

Before: ``neuron-monitor-sim --runtimes 0`` ended in an IndexError traceback; ``--step nan`` (and ``inf``) was
accepted; ``--duration`` was ignored while a large step slept; a device file truncated between the daemon's size
check and its read of a mapped block killed it with SIGBUS (native and pure); ``bench/bench_fleet.py`` ended in a
traceback when Prometheus could not start. After: all of them are one line, or work, and a shrunk device file is
a short read reported as the block's error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

SIM = [sys.executable, "-m", "neuron_monitor.sim.cli"]


def sim(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIM, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


@pytest.mark.parametrize(
    "args",
    [
        ["--step", "nan"],
        ["--step", "inf"],
        ["--step", "-1"],
        ["--step", "0"],
        ["--duration", "nan"],
        ["--duration", "-1"],
        ["--runtimes", "-1"],
        ["--options", '{"step": NaN}'],
        ["--options", '{"step": "fast"}'],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    proc = sim("--shape", "trn1.2xlarge", "--root", str(tmp_path / "t"), *args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("neuron-monitor-sim: ")


def test_no_runtimes_is_an_idle_host(tmp_path: Path) -> None:
    proc = sim("--shape", "trn2.48xlarge", "--runtimes", "0", "--root", str(tmp_path / "t"), "--duration", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "0 runtimes" in proc.stdout
    assert len(list((tmp_path / "t" / "dev").glob("neuron[0-9]*"))) == 16


def test_duration_ends_a_long_step(tmp_path: Path) -> None:
    """--step 600 --duration 1: the simulator stops after its duration, not after its step (the deadline below is
    a hang detector far above the second asked for, not a timing assertion)."""
    proc = sim("--shape", "trn1.2xlarge", "--root", str(tmp_path / "t"), "--step", "600", "--duration", "1", timeout=90)
    assert proc.returncode == 0, proc.stderr


def test_bench_fleet_says_in_one_line_that_prometheus_could_not_start(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "prometheus"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'level=error msg=\"cannot listen\"' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "bench/bench_fleet.py", "--nodes", "1", "--seconds", "1", "--only", "budget"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not run" in lines[0] and "cannot listen" in lines[0], proc.stderr


# A device file truncated between the daemon's last look at it and its read of a data block: the block read is the
# moment a mapping faults. The scenario truncates it right after the device's process list was read (the daemon's
# own snapshot path), reads the blocks, restores the file and reads again, in a child (a SIGBUS is its status).
SHRINK_RACE = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from neuron_monitor.groups.execution_stats.collector import ExecutionStats
    from neuron_monitor.host.rootfs import RootFS
    from neuron_monitor.neuron import devio
    from tests.neuron.test_app_source_truth import Rig

    root = Path(sys.argv[1])
    rig = Rig(root, "inf2.24xlarge", 2)
    stats = ExecutionStats(RootFS("/"))
    stats.collect(*rig.snapshot())
    rig.advance(3)
    victim = rig.runtime("job-00")
    dev = min(victim.plan.cores)
    path = root / "dev" / f"neuron{dev}"
    full = path.stat().st_size
    state = {"shrink": True}
    original = devio.SimFileDevice.list_apps

    def list_then_shrink(self):
        apps = original(self)
        if self.index == dev and state["shrink"]:
            os.truncate(path, 0)  # after every check the daemon makes, before the block is read
        return apps

    devio.SimFileDevice.list_apps = list_then_shrink
    out = {}
    for i in range(3):
        apps, gone = rig.snapshot()
        stats.collect(apps, gone)
        out[str(i)] = {a.tag: a.error for a in apps}
    state["shrink"] = False
    os.truncate(path, full)
    rig.advance(3)
    apps, gone = rig.snapshot()
    stats.collect(apps, gone)
    out["restored"] = {a.tag: a.error for a in apps}
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("mode", ["native", "pure"])
def test_a_device_file_shrinking_under_a_read_is_an_error_not_sigbus(tmp_path: Path, mode: str) -> None:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **MODE_ENV[mode]}
    proc = subprocess.run(
        [sys.executable, "-c", SHRINK_RACE, str(tmp_path / "root")], cwd=REPO, env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, (
        f"status {proc.returncode} ({'SIGBUS' if proc.returncode == -signal.SIGBUS else 'see stderr'})",
        proc.stderr.decode()[-2000:],
    )
    out = json.loads(proc.stdout)
    for i in ("0", "1", "2"):
        assert out[i]["job-01"] == ""  # the other runtime, on another device, is unaffected
        assert "shrank" in out[i]["job-00"], out[i]
    assert out["restored"] == {"job-00": "", "job-01": ""}


MODE_ENV: dict[str, dict[str, str]] = {"native": {}, "pure": {"NEURON_MONITOR_NO_NATIVE": "1"}}


def test_a_device_file_truncated_and_restored_in_a_loop_never_kills_the_daemon(tmp_path: Path) -> None:
    """The daemon on a simulator whose device files are truncated and restored over and over (both native modes:
    each daemon below runs one) keeps writing reports and ends with status 0 on SIGTERM."""
    root = tmp_path / "root"
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "0.1s", "neuron_runtimes": [{"metrics": [{"type": "execution_stats"}]}]}))
    simulator = subprocess.Popen(
        [*SIM, "--shape", "inf2.24xlarge", "--runtimes", "2", "--root", str(root), "--step", "0.02"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        assert simulator.stdout is not None
        for line in simulator.stdout:
            if "ready" in line:
                break
        daemons = {
            mode: subprocess.Popen(
                [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(root), "--no-imds", "-c", str(conf)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=REPO,
                env={**os.environ, **MODE_ENV[mode]},
            )
            for mode in ("native", "pure")
        }
        for d in daemons.values():
            assert d.stdout is not None and d.stdout.readline()  # running and reading the blocks
        devices = sorted((root / "dev").glob("neuron[0-9]*"))
        sizes = {p: p.stat().st_size for p in devices}
        deadline = time.monotonic() + 120
        rounds = 0
        while rounds < 1000 and time.monotonic() < deadline:
            for p in devices:
                os.truncate(p, 4096 if rounds % 2 else 0)
                os.truncate(p, sizes[p])
            rounds += 1
            time.sleep(0.002)
        for mode, d in daemons.items():
            assert d.poll() is None, (mode, d.returncode, d.stderr.read().decode()[-2000:] if d.stderr else "")
            d.send_signal(signal.SIGTERM)
        for mode, d in daemons.items():
            out, err = d.communicate(timeout=60)
            assert d.returncode == 0, (mode, d.returncode, err.decode()[-2000:])
            assert out.count(b"\n") >= 2, mode
    finally:
        simulator.send_signal(signal.SIGTERM)
        simulator.wait(60)


@pytest.mark.parametrize(
    ("module", "prog"),
    [
        ("neuron_monitor.daemon.cli", "neuron-monitor"),
        ("neuron_monitor.top.cli", "neuron-monitor-top"),
        ("neuron_monitor.health.cli", "neuron-monitor-health"),
    ],
)
@pytest.mark.parametrize("where", ["missing", "a file"])
def test_a_tree_directory_that_cannot_hold_the_tree_is_one_line(
    tmp_path: Path, module: str, prog: str, where: str
) -> None:
    """``NEURON_MONITOR_SIM_DIR`` naming a missing directory or a file: one line naming the variable, exit 2 (the
    daemon and neuron-monitor-health ended in a FileNotFoundError/NotADirectoryError traceback)."""
    chosen = tmp_path / "none" if where == "missing" else tmp_path / "file"
    if where == "a file":
        chosen.write_text("x")
    args = ["--simulate", "trn1.2xlarge"] + (["--once"] if prog != "neuron-monitor-health" else [])
    p = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "NEURON_MONITOR_SIM_DIR": str(chosen)},
    )
    assert p.returncode == 2
    why = "No such file or directory" if where == "missing" else "Not a directory"
    assert p.stderr == (
        f"{prog}: --simulate: cannot make the simulated host's tree in NEURON_MONITOR_SIM_DIR={chosen}: {why}\n"
    )
