"""A hostile or broken Kubernetes API server against the DRA lookups: huge, malformed and slow answers, raw
sockets that never answer, plain http to a remote host, odd names from the kubelet.

Every case must end in a bounded, one-line ``KubeApiError`` (or a skipped value), never a hang, a traceback, an
unbounded read or a token in a message. Deadlines asserted here are generous (the request timeout is the bound
under test; the test only checks that the call came back at all and said why).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.k8s.dra import MAX_SLICE_DEVICES, DraDirectory, parse_slices
from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError, parse_server
from tests.k8s.apiserver_stub import StubApiServer

TOKEN = "s3cr3t-token-value"
DEADLINE = 60.0


@pytest.fixture
def api() -> Iterator[StubApiServer]:
    server = StubApiServer(token=TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    return str(path)


def call_in_thread(fn: Any) -> Any:
    """Run ``fn`` and return what it returned or raised; fail (not hang) if it never comes back."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as e:  # the result under test
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(DEADLINE)
    assert not t.is_alive(), "the API call did not come back"
    return box[0]


def test_answer_larger_than_the_cap_is_refused(api: StubApiServer, token_file: str) -> None:
    api.huge = 2 * 1024 * 1024
    client = KubeApi(api.url, token_file, None, timeout=10.0, max_bytes=1024 * 1024)
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and "exceeds the 1048576-byte cap" in str(err)


def test_answer_over_the_cap_without_a_length_is_refused_while_reading(api: StubApiServer, token_file: str) -> None:
    api.huge = 300 * 1024
    api.chunked = True
    client = KubeApi(api.url, token_file, None, timeout=10.0, max_bytes=64 * 1024)
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and "answer exceeds the 65536-byte cap" in str(err)


def test_slow_drip_answer_ends_at_the_deadline(api: StubApiServer, token_file: str) -> None:
    api.slices = [{"spec": {"driver": "neuron.aws.com", "devices": []}}] * 50
    api.drip = 0.05  # one byte every 50 ms: each read is quick, the whole answer takes minutes
    client = KubeApi(api.url, token_file, None, timeout=0.5)
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and "no complete answer within 0.5 s" in str(err)


def test_server_that_accepts_and_never_answers(token_file: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        client = KubeApi(f"http://127.0.0.1:{listener.getsockname()[1]}", token_file, None, timeout=0.5)
        err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    finally:
        listener.close()
    assert isinstance(err, KubeApiError) and "0.5 s" in str(err)


def test_not_json_and_error_statuses_are_one_line(api: StubApiServer, token_file: str) -> None:
    client = KubeApi(api.url, token_file, None, timeout=5.0)
    api.not_json = True
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and str(err).endswith("the answer is not JSON")
    api.not_json = False
    api.status = 500
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and err.status == 500 and "\n" not in str(err)


def test_token_never_appears_in_errors(api: StubApiServer, tmp_path: Path) -> None:
    bad = tmp_path / "token"
    bad.write_text("wrong-" + TOKEN)
    client = KubeApi(api.url, str(bad), None, timeout=5.0)
    err = call_in_thread(lambda: client.get("/apis/resource.k8s.io/v1/resourceslices"))
    assert isinstance(err, KubeApiError) and err.status == 401 and TOKEN not in str(err)


@pytest.mark.parametrize("content", [b"", b"two words", b"tab\there", b"x" * (65 * 1024)])
def test_unusable_token_files_are_refused(api: StubApiServer, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "token"
    path.write_bytes(content)
    client = KubeApi(api.url, str(path), None, timeout=5.0)
    err = call_in_thread(lambda: client.get("/x"))
    assert isinstance(err, KubeApiError) and api.requests == []


def test_token_file_that_is_a_fifo_does_not_block(api: StubApiServer, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    client = KubeApi(api.url, str(fifo), None, timeout=5.0)
    err = call_in_thread(lambda: client.get("/x"))
    assert isinstance(err, KubeApiError) and "FIFO" in str(err)


@pytest.mark.parametrize(
    "server", ["http://10.0.0.1:6443", "http://example.com", "ftp://127.0.0.1", "https://", "http://127.0.0.1:99999"]
)
def test_token_never_travels_in_clear_to_a_remote_host(server: str) -> None:
    with pytest.raises(KubeApiError):
        parse_server(server)


def test_loopback_http_and_any_https_are_accepted() -> None:
    assert parse_server("http://127.0.0.1:8001").port == 8001
    assert parse_server("http://[::1]:8001").host == "::1"
    assert parse_server("https://10.100.0.1:443").scheme == "https"


def test_hostile_slice_shapes_are_skipped_and_bounded() -> None:
    out: dict[tuple[str, str], Any] = {}
    devices = [{"name": f"d{i}", "attributes": {"deviceId": {"int": i % 16}}} for i in range(MAX_SLICE_DEVICES + 50)]
    items: list[Any] = [
        {"spec": {"driver": "neuron.aws.com", "pool": {"name": "p", "generation": "9"}, "devices": devices}},
        {"spec": {"driver": "neuron.aws.com", "pool": "x", "devices": [None, 3, {"name": 7}, {"name": "y" * 10_000}]}},
        {"spec": {"driver": "neuron.aws.com", "devices": [{"name": "t", "attributes": {"deviceId": {"int": True}}}]}},
        {
            "spec": {
                "driver": "neuron.aws.com",
                "devices": [{"name": "big", "attributes": {"deviceId": {"int": 1 << 70}}}],
            }
        },
    ]
    parse_slices(items, "neuron.aws.com", out, {})
    assert len(out) == MAX_SLICE_DEVICES
    assert all(len(name) <= 253 for _, name in out)


def test_kubelet_claim_names_that_are_not_object_names_never_reach_a_url(api: StubApiServer, token_file: str) -> None:
    directory = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0), node_name="n")
    directory.begin()
    for ns, name in [("ml", "../../api/v1/secrets"), ("ML", "c"), ("ml", "c?x=1"), ("", "c"), ("ml", "c" * 300)]:
        assert directory.claim(ns, name) is None
    assert api.requests == []


def test_claim_reads_per_refresh_are_bounded(api: StubApiServer, token_file: str) -> None:
    directory = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0), node_name="n", max_claim_gets=4)
    directory.begin()
    for i in range(20):
        directory.claim("ml", f"c{i}")
    assert api.count("/resourceclaims/") == 4


def test_an_unreachable_server_costs_one_timeout_per_refresh(token_file: str) -> None:
    listener = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        api = KubeApi(f"http://127.0.0.1:{listener.getsockname()[1]}", token_file, None, timeout=0.3)
        directory = DraDirectory(api, node_name="n")

        def refresh() -> None:
            directory.begin()
            directory.slice_devices()
            for i in range(10):
                directory.claim("ml", f"c{i}")

        assert call_in_thread(refresh) is None
        assert api.requests == 1  # the slice listing timed out: no claim was asked
        assert call_in_thread(refresh) is None
        assert api.requests == 2  # next refresh: the listing waits for its cache age, one claim is tried
        assert any("0.3 s" in e for e in directory.errors)
    finally:
        listener.close()


def _node_slice(node: str, pool: str, device_id: int, generation: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-neuron"},
        "spec": {
            "driver": "neuron.aws.com",
            "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": "dev-a", "attributes": {"deviceId": {"int": device_id}}}],
        },
    }


def test_a_slice_of_another_node_is_refused_and_named(api: StubApiServer, token_file: str) -> None:
    """Before (issue 39): a server that ignores the field selector answered node-b's slice of the same pool name
    (a newer generation), and node-b's device 0 was attributed on node-a."""
    api.ignore_node_selector = True
    api.slices = [_node_slice("node-a", "shared", 5, 1), _node_slice("node-b", "shared", 0, 2)]
    directory = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0), node_name="node-a")
    directory.begin()
    devices = directory.slice_devices()
    assert {key: d.device_id for key, d in devices.items()} == {("shared", "dev-a"): 5}
    (error,) = directory.errors
    assert "node-b-neuron" in error and "'node-b'" in error and "this node is 'node-a'" in error
    api.slices.append({**_node_slice("", "shared", 3, 3), "metadata": {"name": "unbound"}})
    directory.begin()
    devices = directory._list_slices()  # listed again now (the cache would wait max_age)
    assert {key: d.device_id for key, d in devices.items()} == {("shared", "dev-a"): 5}
    assert "and 1 more" in directory.errors[0]


def test_without_a_node_name_slices_of_several_nodes_are_all_refused(api: StubApiServer, token_file: str) -> None:
    api.slices = [_node_slice("node-a", "shared", 5, 1), _node_slice("node-b", "shared", 0, 2)]
    directory = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0))
    directory.begin()
    assert directory.slice_devices() == {}
    (error,) = directory.errors
    assert "2 nodes (node-a, node-b)" in error and "NODE_NAME" in error
    api.slices = [_node_slice("node-a", "shared", 5, 1)]
    lone = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0))
    lone.begin()
    assert {key: d.device_id for key, d in lone.slice_devices().items()} == {("shared", "dev-a"): 5}
    assert lone.errors == []
