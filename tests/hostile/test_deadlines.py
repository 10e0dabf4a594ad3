"""Deadlines are totals (issue 39, item 6): every client of the project ends its exchange within its deadline,
however slowly the server answers.

Each client here talks to a loopback server that sends one byte every 0.5 s for 60 s (the status line and
headers too, or only the body), with a 2 s deadline; the test allows 30 s for the call to come back, far more
than the deadline and far less than the trickle. Before: ``neuron-monitor-health --url --timeout 3`` ran 50 s (a
per-read timeout), instance metadata and CloudWatch requests likewise (each read reset the timeout).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.host.imds import fetch_instance_info
from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError
from tests.hostile.trickle import TrickleServer

DEADLINE = 2.0
COME_BACK = 30.0  # the trickle lasts 60 s


@pytest.fixture(params=[False, True], ids=["body", "head"])
def trickle(request: pytest.FixtureRequest) -> Iterator[TrickleServer]:
    server = TrickleServer(every=0.5, lasts=60.0, head=request.param)
    yield server
    server.close()


def ended(fn: Callable[[], Any]) -> Any:
    """What ``fn`` returned or raised; fails if it has not come back within COME_BACK seconds."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as e:  # the result under test
            box.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(COME_BACK)
    assert not thread.is_alive(), f"still running after {COME_BACK} s: the deadline is not a total"
    return box[0]


@pytest.mark.e2e
def test_health_url_ends_within_its_timeout(trickle: TrickleServer) -> None:
    cmd = [sys.executable, "-m", "neuron_monitor.health.cli", "--url", trickle.url, "--timeout", str(DEADLINE)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=COME_BACK)
    except subprocess.TimeoutExpired:
        pytest.fail(f"neuron-monitor-health --url --timeout {DEADLINE:g} still ran after {COME_BACK} s")
    assert done.returncode == 2, done.stderr
    assert f"no complete answer within {DEADLINE:g} s" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


def test_kubernetes_api_request_ends_within_its_timeout(trickle: TrickleServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken")
    client = KubeApi(trickle.url, str(token), None, timeout=DEADLINE)
    err = ended(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and f"no complete answer within {DEADLINE:g} s" in str(err)


def test_instance_metadata_ends_within_its_budget(trickle: TrickleServer) -> None:
    info = ended(lambda: fetch_instance_info(trickle.url, budget=DEADLINE))
    assert info.instance_id == "" and "did not answer in time" in info.error, info


def test_cloudwatch_request_ends_within_connect_plus_read_timeout(
    trickle: TrickleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ReadTimeoutError

    from neuron_monitor.exporters.cloudwatch.client import make_client
    from neuron_monitor.exporters.cloudwatch.publisher import Outcome, classify

    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    client, _ = make_client("us-east-1", trickle.url, connect_timeout=1.0, read_timeout=1.0)
    err = ended(lambda: client.put_metric_data(Namespace="Test", MetricData=[{"MetricName": "m", "Value": 1.0}]))
    assert isinstance(err, ReadTimeoutError), repr(err)
    assert classify(err)[0] is Outcome.UNCONFIRMED  # it was sent: never resent
    assert trickle.connections == 1


def test_kubelet_pod_resources_call_ends_within_its_timeout(tmp_path: Path) -> None:
    """gRPC's timeout is a deadline for the whole call: a kubelet that takes 60 s to answer ends it at 2 s."""
    pytest.importorskip("grpc")
    from neuron_monitor.k8s.podresources import PodResourcesClient, PodResourcesError
    from tests.k8s.podresources_server import FakeKubelet

    path = str(tmp_path / "kubelet.sock")
    kubelet = FakeKubelet(path)
    kubelet.delay = 60.0
    kubelet.start()
    client = PodResourcesClient(path, timeout=DEADLINE)
    try:
        started = time.monotonic()
        err = ended(client.list_pods)
    finally:
        client.close()
        kubelet.stop()
    assert isinstance(err, PodResourcesError) and "DEADLINE_EXCEEDED" in str(err), err
    assert time.monotonic() - started < COME_BACK


def test_the_trickle_lasts_longer_than_the_wait() -> None:
    """The premise of the tests above: a plain per-read timeout does not end a read of the trickle in time."""
    import http.client

    with TrickleServer(every=0.5, lasts=60.0) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=DEADLINE)
        conn.request("GET", "/")
        resp = conn.getresponse()
        got = b""
        started = time.monotonic()
        while time.monotonic() - started < 3 * DEADLINE:  # three deadlines' worth, each read well within one
            got += resp.read(1)
        conn.close()
    assert len(got) >= 2
