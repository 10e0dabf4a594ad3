"""The real daemon with --k8s-info against a real pod-resources gRPC server: neuron_k8s_info in its reports."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from .podresources_server import FakeKubelet

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def read_reports_until(proc: subprocess.Popen[bytes], pred, timeout: float = 30.0) -> dict:  # type: ignore[no-untyped-def]
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    poller = select.poll()  # not select(): the descriptor may be past 1023 in a long test session
    poller.register(proc.stdout.fileno(), select.POLLIN)
    while time.monotonic() < deadline:
        if not poller.poll(500):
            continue
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():  # the resync newline before the first report
                continue
            report = orjson.loads(line)
            if pred(report):
                return report
    raise AssertionError("no matching report")


def start_daemon(tmp_path: Path, socket_path: str) -> subprocess.Popen[bytes]:
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "200ms", "system_metrics": [{"type": "memory_info"}]}')
    cmd = [sys.executable, "-m", "neuron_monitor.cli", "-c", str(conf), "--no-imds", "--k8s-info"]
    return subprocess.Popen(
        [*cmd, "--pod-resources-socket", socket_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )


def test_reports_carry_pod_attribution(kubelet: FakeKubelet, tmp_path: Path) -> None:
    device = ("aws.amazon.com/neuron", ["0"])
    kubelet.pods = [{"name": "llama-0", "namespace": "ml", "containers": [{"name": "trainer", "devices": [device]}]}]
    kubelet.allocatable = [("aws.amazon.com/neuron", ["0"]), ("aws.amazon.com/neuroncore", ["0", "1"])]
    proc = start_daemon(tmp_path, kubelet.socket_path)
    try:
        report = read_reports_until(proc, lambda r: r.get("neuron_k8s_info", {}).get("error") == "")
        info = report["neuron_k8s_info"]
        owner = {"pod_name": "llama-0", "namespace": "ml", "container_name": ["trainer"]}
        assert info["neurondevices_k8s_info"] == {"0": owner}
        assert info["neuroncores_k8s_info"] == {"0": owner, "1": owner}
        assert report["system_data"]["memory_info"]["error"] == ""

    finally:
        proc.terminate()
        proc.wait(10)


def test_missing_socket_is_an_error_in_neuron_k8s_info_only(sock_dir: Path, tmp_path: Path) -> None:
    proc = start_daemon(tmp_path, str(sock_dir / "kubelet.sock"))
    try:
        report = read_reports_until(proc, lambda r: "not found" in r.get("neuron_k8s_info", {}).get("error", ""))
        assert report["neuron_k8s_info"]["neuroncores_k8s_info"] == {}
        assert report["system_data"]["memory_info"]["error"] == ""
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
