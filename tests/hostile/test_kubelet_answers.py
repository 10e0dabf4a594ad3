"""Whatever answers on the kubelet's pod-resources socket: answers of millions of tiny entries, within gRPC's
16 MiB message cap (a real gRPC server here, and the real daemon with ``--k8s-info``).

Before: the hand decoder built every entry it was sent. 16 MiB of empty pods (8.4 million) took 29 s and 3.0 GB to
decode, one pod of 8 million containers 32 s and 3.8 GB, each collection again, and 16 MiB of realistic small pods
9 s. After: one answer may hold at most ``podresources.MAX_ENTRIES`` field values (Kubernetes supports at most 110
pods per node); past that the answer is refused ("more than 100000 entries") before its entries are held, and the
error is ``neuron_k8s_info``'s alone.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.test_daemon_k8s_info import read_reports_until, start_daemon

grpc = pytest.importorskip("grpc")

from neuron_monitor.k8s.podresources import PodResourcesClient, PodResourcesError  # noqa: E402

MAX_ENTRIES = 100_000  # podresources.MAX_ENTRIES

MIB = 1024 * 1024


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return bytes(out + bytes([low]))
        out.append(low | 0x80)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _fill(entry: bytes, around: int = 0) -> int:
    return (16 * MIB - 1024 - around) // len(entry)


def _answers() -> dict[str, bytes]:
    device = _field(1, b"aws.amazon.com/neuroncore") + _field(2, b"0")
    pod = _field(1, b"p") + _field(2, b"ns") + _field(3, _field(1, b"c") + _field(2, device))
    empty = _field(1, b"")
    container = _field(3, b"")
    ids = _field(2, b"0")
    return {
        "small pods": _field(1, pod) * _fill(_field(1, pod)),
        "empty pods": empty * _fill(empty),
        "one pod of millions of containers": _field(1, _field(1, b"p") + container * _fill(container, 16)),
        "one device list of millions of ids": _field(
            1, _field(1, b"p") + _field(3, _field(1, b"c") + _field(2, _field(1, b"r") + ids * _fill(ids, 64)))
        ),
    }


ANSWERS = _answers()


class Kubelet:
    """A gRPC server on a unix socket answering every pod-resources call with ``answer``'s bytes."""

    def __init__(self, path: str) -> None:
        self.answer = b""
        self.path = path
        me = self

        class Generic(grpc.GenericRpcHandler):  # type: ignore[misc]
            def service(self, details: Any) -> Any:
                return grpc.unary_unary_rpc_method_handler(lambda request, context: me.answer)

        self.server = grpc.server(futures.ThreadPoolExecutor(2), options=[("grpc.max_send_message_length", 32 * MIB)])
        self.server.add_generic_rpc_handlers((Generic(),))
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[Kubelet]:
    k = Kubelet(str(tmp_path / "kubelet.sock"))
    yield k
    k.stop()


@pytest.mark.parametrize("shape", list(ANSWERS))
def test_an_answer_of_millions_of_entries_is_refused_before_they_are_held(kubelet: Kubelet, shape: str) -> None:
    kubelet.answer = ANSWERS[shape]
    assert 15 * MIB < len(kubelet.answer) < 16 * MIB
    client = PodResourcesClient(kubelet.path, timeout=60)
    tracemalloc.start()
    try:
        with pytest.raises(PodResourcesError, match=f"more than {MAX_ENTRIES} entries"):
            client.list_pods()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    # the answer itself (16 MiB, held by gRPC) plus the entries let through: far from the gigabytes of before
    assert peak < 100 * MIB, f"decoding held {peak / MIB:.0f} MiB"


def test_an_allocatable_answer_of_millions_of_entries_is_refused(kubelet: Kubelet) -> None:
    entry = _field(1, _field(1, b"aws.amazon.com/neuroncore") + _field(2, b"0"))
    kubelet.answer = entry * _fill(entry)
    client = PodResourcesClient(kubelet.path, timeout=60)
    try:
        with pytest.raises(PodResourcesError, match=f"more than {MAX_ENTRIES} entries"):
            client.allocatable()
    finally:
        client.close()


def test_the_daemon_names_it_in_neuron_k8s_info_and_goes_on(kubelet: Kubelet, tmp_path: Path) -> None:
    kubelet.answer = ANSWERS["empty pods"]
    proc = start_daemon(tmp_path, kubelet.path)
    try:
        report = read_reports_until(
            proc, lambda r: "more than" in r.get("neuron_k8s_info", {}).get("error", ""), timeout=120
        )
        assert report["neuron_k8s_info"]["neuroncores_k8s_info"] == {}
        assert report["system_data"]["memory_info"]["error"] == ""
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
