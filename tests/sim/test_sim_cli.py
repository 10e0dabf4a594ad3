"""neuron-monitor-sim as a command: bad usage exits 2 with one line; a run builds the tree and stops cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruth
from neuron_monitor.sim.temporary import TemporarySimulator

REPO = Path(__file__).resolve().parents[2]


def sim(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "p4d.24xlarge", "--root", "{tmp}/r"], "unknown shape 'p4d.24xlarge'"),
        (["--shape", "trn1.2xlarge", "--lnc", "2", "--root", "{tmp}/r"], "does not support logical NeuronCore"),
        (["--shape", "trn1.2xlarge", "--root", "{tmp}/full"], "is not empty and is not a simulator tree"),
        (["--shape", "trn1.2xlarge", "--root", "{tmp}/r", "--options", "[1]"], "expected a JSON object"),
        (["--root", "{tmp}/r"], "--shape and --root are required"),
    ],
)
def test_bad_usage(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "precious.txt").write_text("keep me")
    r = sim(*[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2
    assert message in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert (tmp_path / "full" / "precious.txt").exists()


def test_run_for_a_duration(tmp_path: Path) -> None:
    root = tmp_path / "root"
    r = sim("--shape", "inf1.6xlarge", "--runtimes", "2", "--root", str(root), "--duration", "1",
            "--options", json.dumps({"load_time": 0, "worker_cpu": 0}))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (root / "sys/class/neuron_device/neuron3/core_count").read_text() == "4"
    assert not (root / "sys/class/neuron_device/neuron0/stats/hardware").exists()  # Inf1: no ECC files
    assert (root / "sys/module/neuron/version").read_text() == "2.24.7.0\n"
    assert (root / "sys/class/dmi/id/product_name").read_text() == "inf1.6xlarge\n"
    truth = GroundTruth(root / GROUND_TRUTH_FILE)
    assert truth.ready()["devices"] == 4
    assert [e["reason"] for e in truth.events("stop")] == ["simulator shutdown"] * 2
    assert truth.events()[-1]["event"] == "stopped"
    assert truth.total("job-00", "completed") > 0
    r = sim("--shape", "trn1.2xlarge", "--root", str(root), "--duration", "0.2")  # a previous tree is reused
    assert r.returncode == 0, r.stderr
    assert not (root / "sys/class/neuron_device/neuron3").exists()


def test_temporary_simulator_lifecycle() -> None:
    with TemporarySimulator("trn2.48xlarge", runtimes=2, lnc=1, load_time=0) as s:
        root = s.root
        pid = s.pid_of("job-01")
        assert (root / "opt/aws/neuron/logical_nc_config").read_text() == "NEURON_LOGICAL_NC_CONFIG=1\n"
        assert (root / "proc" / str(pid)).resolve() == Path(f"/proc/{pid}")
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"NEURON_PROCESS_TAG=job-01" in env
        with pytest.raises(RuntimeError, match="no such runtime"):
            s.stop_runtime("nope")
        with pytest.raises(ValueError, match="unknown command kind"):
            s.command("explode")
        s.stop_runtime("job-01")
        assert not Path(f"/proc/{pid}").exists() or b"State:\tZ" in Path(f"/proc/{pid}/status").read_bytes()
    assert not root.exists()
