"""End to end on the simulator: simulated driver files -> the daemon (neuron_device_health) -> neuron-monitor-taint
-> the stand-in API server. A fault injected through the simulator's control makes a DeviceTaintRule with the
device's DRA selector and the configured effect; the fault cleared, the rule goes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.taint.rules import TAINT_KEY

from .helpers import DRIVER, NODE, TaintProcess, api_server, wait_for

pytestmark = pytest.mark.e2e


def test_an_injected_fault_taints_the_device_and_clearing_it_removes_the_rule(tmp_path: Path) -> None:
    server = api_server()
    sim = TemporarySimulator("trn2.48xlarge", runtimes=1, seed=3, ecc_rate=0)
    sim.start()
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "1s", "system_metrics": [{"type": "neuron_device_health"}]}))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(sim.root), "-c", str(conf), "--no-imds"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert daemon.stdout is not None
    taint = TaintProcess(server, tmp_path, "--grace", "2", "--hold", "2", "--effect", "NoSchedule", stdin=daemon.stdout)
    daemon.stdout.close()
    try:
        wait_for("reports reach the taint process", lambda: "neuron_monitor_taint_reports_total 0" not in _m(taint))
        assert server.taint_rules == {}
        sim.command("unhealthy", device=5, component="dma")
        wait_for("the rule", lambda: server.taint_rules)
        (rule,) = server.taint_rules.values()
        assert rule["spec"]["deviceSelector"] == {"driver": DRIVER, "pool": NODE, "device": "neurondevice5"}
        assert rule["spec"]["taint"] == {"key": TAINT_KEY, "value": "unhealthy_component", "effect": "NoSchedule"}
        sim.command("healthy", device=5, component="dma")
        wait_for("the rule removed", lambda: not server.taint_rules)
        daemon.terminate()
        assert daemon.wait(60) == 0
        assert taint.proc.wait(60) == 0
        summary = taint.summary()
        assert summary["changes"] == {"create": 1, "delete": 1} and summary["reason"] == "eof"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        taint.kill()
        sim.close()
        server.stop()


def _m(taint: TaintProcess) -> str:
    try:
        return taint.metrics.read_text()
    except FileNotFoundError:
        return "neuron_monitor_taint_reports_total 0"


def test_past_the_node_cap_only_devices_the_driver_files_confirm_are_tainted(tmp_path: Path) -> None:
    """The reports say devices 0-3 are unhealthy; the driver's files (read by the taint process itself through
    --confirm-root) say only 0, 1 and 2 are: with a cap of 2, device 2 is confirmed and tainted, device 3 is not."""
    server = api_server()
    sim = TemporarySimulator("trn2.48xlarge", runtimes=1, seed=3, ecc_rate=0)
    sim.start()
    for device in (0, 1, 2):
        sim.command("unhealthy", device=device, component="dma")
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--node-cap", "2", "--confirm-root", str(sim.root))
    try:
        taint.feed(
            {i: "unhealthy" for i in range(4)},
            lambda: len(server.taint_rules) == 3 and "node_cap" in _m(taint),
            "three rules and a refusal",
        )
        summary = taint.close()
        devices = sorted(r["spec"]["deviceSelector"]["device"] for r in server.taint_rules.values())
        assert devices == ["neurondevice0", "neurondevice1", "neurondevice2"]
        assert summary["refused"]["node_cap"] >= 1
        assert "neuron device 3 (ecc_uncorrected): the node cap of 2 devices is reached" in taint.stderr()
    finally:
        taint.kill()
        sim.close()
        server.stop()
