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
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--no-imds", "--k8s-info"]
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


def trn2_root(tmp_path: Path) -> Path:
    """A host root whose sysfs says: 16 trn2 devices of 8 physical cores (LNC 2: 4 logical cores each)."""
    from neuron_monitor.sim.shapes import get_shape

    shape = get_shape("trn2.48xlarge")
    root = tmp_path / "root"
    for i in range(shape.devices):
        arch = root / "sys/class/neuron_device" / f"neuron{i}" / "info/architecture"
        arch.mkdir(parents=True)
        (arch.parent.parent / "core_count").write_text(str(shape.phys_cores))
        (arch / "arch_type").write_text(shape.nd_arch + "\n")
        (arch / "instance_type").write_text(shape.instance_family + "\n")
        (arch / "device_name").write_text(shape.device_name + "\n")
    (root / "proc").mkdir()
    (root / "proc/meminfo").write_bytes((REPO / "neuron_monitor/groups/memory_info/testdata/meminfo_trn2").read_bytes())
    return root


def test_daemon_attributes_dra_claims_with_the_api_server(kubelet: FakeKubelet, tmp_path: Path) -> None:
    from .apiserver_stub import StubApiServer
    from .test_pod_info_dra import NODE, TOKEN, claim, resource_claim, resource_slice, slice_device

    kubelet.pods = [
        {"name": "pod0", "namespace": "ml", "containers": [{"name": "ctr0", "claims": [claim("c0", "ml", "dev-a")]}]},
        {
            "name": "pod1",
            "namespace": "ml",
            "containers": [{"name": "ctr0", "claims": [claim("c1", "ml", "neurondevice7")]}],
        },
        {"name": "bad", "namespace": "ml", "containers": [{"name": "c", "claims": [claim("c2", "ml", "chip-x")]}]},
        {
            "name": "cuda",
            "namespace": "gpu",
            "containers": [{"name": "c", "claims": [claim("g", "gpu", "gpu-0", driver="gpu.nvidia.com")]}],
        },
        {
            "name": "legacy",
            "namespace": "old",
            "containers": [{"name": "c", "devices": [("aws.amazon.com/neuron", ["0"])]}],
        },
    ]
    api = StubApiServer(token=TOKEN).start()
    api.slices = [resource_slice(NODE, [slice_device("dev-a", 5), slice_device("neurondevice7", 7)])]
    api.claims[("ml", "c0")] = resource_claim("c0", "ml", {"pod0": "uid-pod0"}, ["dev-a"], lnc=1)
    api.claims[("ml", "c1")] = resource_claim("c1", "ml", {"pod1": "uid-pod1"}, ["neurondevice7"], lnc=None)
    api.claims[("ml", "c2")] = resource_claim("c2", "ml", {"bad": "uid-bad"}, ["chip-x"], lnc=None)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "200ms", "system_metrics": [{"type": "memory_info"}]}')
    cmd = [
        *("-c", str(conf), "--no-imds", "--root", str(trn2_root(tmp_path)), "--k8s-info"),
        *("--pod-resources-socket", kubelet.socket_path, "--k8s-api", api.url),
        *("--k8s-api-token-file", str(token), "--node-name", NODE),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        report = read_reports_until(
            proc, lambda r: "5" in r.get("neuron_k8s_info", {}).get("neurondevices_k8s_info", {})
        )
        info = report["neuron_k8s_info"]
        devices = info["neurondevices_k8s_info"]
        assert set(devices) == {"0", "5", "7"}
        assert devices["5"] == {
            "pod_name": "pod0",
            "namespace": "ml",
            "container_name": ["ctr0"],
            "pod_uid": "uid-pod0",
            "claim_name": "c0",
            "claim_namespace": "ml",
        }
        assert devices["0"] == {"pod_name": "legacy", "namespace": "old", "container_name": ["c"]}
        cores = info["neuroncores_k8s_info"]
        # c0 at LNC 1 on an LNC 2 node: device 5 has 8 cores; c1 at the node's LNC: 4 cores
        assert [k for k, v in cores.items() if v.get("claim_name") == "c0"] == [str(c) for c in range(40, 48)]
        assert [k for k, v in cores.items() if v.get("claim_name") == "c1"] == [str(c) for c in range(28, 32)]
        assert "claim ml/c2: device 'chip-x'" in info["error"]
        assert report["system_data"]["memory_info"]["error"] == ""
    finally:
        proc.terminate()
        proc.wait(10)
        api.stop()
    assert proc.stderr is not None
    assert TOKEN.encode() not in proc.stderr.read()


def test_unusable_api_server_url_exits_2_with_one_line(tmp_path: Path) -> None:
    url = "http://10.0.0.1:6443"  # a token must not travel in clear (other bad URLs: tests/hostile/test_k8s_api.py)
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "200ms", "system_metrics": [{"type": "memory_info"}]}')
    cmd = ["-c", str(conf), "--no-imds", "--once", "--k8s-info", "--k8s-api", url]
    done = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", *cmd],
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and "--k8s-api" in done.stderr.decode()
    assert b"Traceback" not in done.stderr
