"""PodInfoWatcher against a real gRPC pod-resources server on a unix socket."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from neuron_monitor.k8s.pod_info import NOT_READ_YET, PodInfoWatcher

from .podresources_server import FakeKubelet

CORE = "aws.amazon.com/neuroncore"
DEVICE = "aws.amazon.com/neuron"
REPO = Path(__file__).resolve().parents[2]


def wait_for(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.02)


def training_pods() -> list[dict[str, Any]]:
    return [
        {"name": "llama-0", "namespace": "ml", "containers": [{"name": "trainer", "devices": [(DEVICE, ["1"])]}]},
        {"name": "bert", "namespace": "serve", "containers": [{"name": "server", "devices": [(CORE, ["0"])]}]},
        {"name": "web", "namespace": "default", "containers": [{"name": "nginx", "devices": []}]},
    ]


def test_watcher_publishes_the_mapping_in_the_background(kubelet: FakeKubelet) -> None:
    kubelet.pods = training_pods()
    kubelet.allocatable = [(DEVICE, ["0", "1"]), (CORE, ["0", "1", "2", "3"])]
    with PodInfoWatcher(kubelet.socket_path, refresh=0.05) as w:
        wait_for(lambda: w.snapshot()["error"] == "" and w.stats["refreshes"] >= 2)
        info = w.snapshot()
    # cores per device (2) inferred from GetAllocatableResources
    assert info["neuroncores_k8s_info"] == {
        "0": {"pod_name": "bert", "namespace": "serve", "container_name": ["server"]},
        "2": {"pod_name": "llama-0", "namespace": "ml", "container_name": ["trainer"]},
        "3": {"pod_name": "llama-0", "namespace": "ml", "container_name": ["trainer"]},
    }
    assert info["neurondevices_k8s_info"] == {
        "0": {"pod_name": "bert", "namespace": "serve", "container_name": ["server"]},
        "1": {"pod_name": "llama-0", "namespace": "ml", "container_name": ["trainer"]},
    }
    assert list(info) == ["period", "neuroncores_k8s_info", "neurondevices_k8s_info", "error"]
    assert info["period"] > 0  # the time between the last two refreshes (any length on a loaded host)
    assert kubelet.calls["List"] >= 2
    orjson.dumps(info)  # serialisable as the daemon will print it


def test_cores_per_device_from_the_caller_wins_over_allocatable(kubelet: FakeKubelet) -> None:
    kubelet.pods = training_pods()
    kubelet.allocatable = None  # old kubelet: UNIMPLEMENTED
    w = PodInfoWatcher(kubelet.socket_path, cores_per_device=4)
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert info["error"] == ""
    assert sorted(info["neuroncores_k8s_info"], key=int) == ["0", "4", "5", "6", "7"]
    assert kubelet.calls["GetAllocatableResources"] == 0


def test_missing_socket_fills_error_and_nothing_else(sock_dir: Path) -> None:
    w = PodInfoWatcher(str(sock_dir / "absent.sock"))
    assert w.snapshot()["error"] == NOT_READ_YET
    info = w.refresh_once()
    w.close()
    assert "not found" in info["error"] and "absent.sock" in info["error"]
    assert info["neuroncores_k8s_info"] == {} and info["neurondevices_k8s_info"] == {}


def test_kubelet_outage_keeps_last_mapping_for_a_bounded_time(kubelet: FakeKubelet) -> None:
    kubelet.pods = training_pods()
    w = PodInfoWatcher(kubelet.socket_path, cores_per_device=2, keep_last_good=3600)
    try:
        good = w.refresh_once()
        assert good["error"] == ""
        kubelet.fail_with = grpc.StatusCode.UNAVAILABLE
        kept = w.refresh_once()
        assert "UNAVAILABLE" in kept["error"] and "showing the mapping read" in kept["error"]
        assert kept["neuroncores_k8s_info"] == good["neuroncores_k8s_info"]
        w.keep_last_good = 0.0
        time.sleep(0.01)
        dropped = w.refresh_once()
        assert "UNAVAILABLE" in dropped["error"] and "showing" not in dropped["error"]
        assert dropped["neuroncores_k8s_info"] == {}
        kubelet.fail_with = None
        assert w.refresh_once()["error"] == ""
    finally:
        w.close()


def test_snapshot_never_waits_for_a_slow_kubelet(kubelet: FakeKubelet) -> None:
    kubelet.pods = training_pods()
    release = threading.Event()

    w = PodInfoWatcher(kubelet.socket_path, cores_per_device=2, refresh=0.05, call_timeout=30)
    w.refresh_once()
    before = w.snapshot()

    # make the next List block inside the server until released
    entered = threading.Event()
    original = FakeKubelet.__dict__["_devices"]

    def slow_devices(self: FakeKubelet, devices: Any) -> Any:
        entered.set()
        release.wait(20)
        return original(self, devices)

    kubelet._devices = slow_devices.__get__(kubelet)  # type: ignore[method-assign]
    w.start()
    try:
        assert entered.wait(10)
        got: list[dict[str, Any]] = []
        t = threading.Thread(target=lambda: got.append(w.snapshot()))
        t.start()
        t.join(5)
        assert not t.is_alive() and got[0]["neuroncores_k8s_info"] == before["neuroncores_k8s_info"]
    finally:
        release.set()
        w.close()


def test_snapshot_returns_a_fresh_top_level_object(kubelet: FakeKubelet) -> None:
    w = PodInfoWatcher(kubelet.socket_path)
    w.refresh_once()
    a = w.snapshot()
    a["fresh"] = True
    assert "fresh" not in w.snapshot()
    w.close()


@pytest.mark.e2e
def test_cli_prints_the_object_and_fails_when_the_socket_is_missing(kubelet: FakeKubelet, sock_dir: Path) -> None:
    kubelet.pods = training_pods()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_monitor.k8s.pod_info",
            "--pod-resources-socket",
            kubelet.socket_path,
            "--cores-per-device",
            "2",
            *("--lnc", "2", "--device-count", "2", "--k8s-api", "off", "--dra-driver", "neuron.aws.com"),
        ],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    info = orjson.loads(ok.stdout)
    assert info["neurondevices_k8s_info"]["1"]["pod_name"] == "llama-0"
    bad = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.k8s.pod_info", "--pod-resources-socket", str(sock_dir / "x.sock")],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr.decode().count("\n") == 1 and "not found" in bad.stderr.decode()
    assert b"Traceback" not in bad.stderr
