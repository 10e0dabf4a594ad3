"""Client of the kubelet pod-resources API (v1): List and GetAllocatableResources over a unix socket.

Reads: the gRPC service ``v1.PodResourcesLister`` on the kubelet's socket (by default
/var/lib/kubelet/pod-resources/kubelet.sock). Returns: plain dataclasses (pods -> containers -> device-plugin
devices by resource name and DRA claims with their allocated devices, and the node's allocatable devices; the
kubelet does not list DRA devices there). Messages are decoded by hand from the wire format (the
schema is podresources.proto beside this file), so the only run-time dependency is ``grpcio``, imported when
a client is first created (docs/kubernetes-dra.md says why this is kept over the protobuf runtime). Every
failure becomes ``PodResourcesError`` with a one-line reason.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from neuron_monitor.k8s.wire import WireError, field_values, last_text, message, text

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "/v1.PodResourcesLister"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class PodResourcesError(Exception):
    """The pod-resources API could not be read; ``str()`` is the one-line reason, ``code`` the gRPC status."""

    def __init__(self, reason: str, code: str = "") -> None:
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class ClaimResource:
    """One device of a DRA claim: (driver, pool, device) names it uniquely in the cluster."""

    driver_name: str
    pool_name: str
    device_name: str


@dataclass(frozen=True)
class DynamicResource:
    """A ResourceClaim a container uses (``ContainerResources.dynamic_resources``) and its allocated devices."""

    claim_name: str
    claim_namespace: str
    claim_resources: tuple[ClaimResource, ...] = ()


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = field(default=())


MAX_ENTRIES = 100_000
"""The most field values one answer may hold, every kind together (pods, containers, their device lists and device
ids, claims and claim devices, and their names). Kubernetes supports at most 110 pods per node ("Considerations for
large clusters", kubernetes.io), and a Neuron node has at most 16 devices of 8 cores: a real answer holds a few
thousand. Without a bound, 16 MiB of empty entries from whatever answers on the socket took 29 s and 3 GB to
decode."""


class Budget:
    """Entries left to decode in one answer; `gather` is `field_values` that spends them (WireError past the end)."""

    __slots__ = ("left",)

    def __init__(self, entries: int = MAX_ENTRIES) -> None:
        self.left = entries

    def gather(self, data: memoryview | bytes, numbers: tuple[int, ...]) -> dict[int, list[int | memoryview]]:
        try:
            found = field_values(data, numbers, self.left)
        except WireError as e:
            if str(e).startswith("more than"):
                raise WireError(f"more than {MAX_ENTRIES} entries (a kubelet lists its own node's pods)") from None
            raise
        self.left -= sum(len(v) for v in found.values())
        return found


def decode_container_devices(data: memoryview, budget: Budget | None = None) -> ContainerDevices:
    """ContainerDevices: resource_name=1, device_ids=2 (topology=3 is skipped)."""
    f = (budget or Budget()).gather(data, (1, 2))
    return ContainerDevices(last_text(f[1]), tuple(text(v) for v in f[2]))


def decode_claim_resource(data: memoryview, budget: Budget | None = None) -> ClaimResource:
    """ClaimResource: driver_name=2, pool_name=3, device_name=4 (cdi_devices=1 and share_id=5 are skipped)."""
    f = (budget or Budget()).gather(data, (2, 3, 4))
    return ClaimResource(last_text(f[2]), last_text(f[3]), last_text(f[4]))


def decode_dynamic_resource(data: memoryview, budget: Budget | None = None) -> DynamicResource:
    """DynamicResource: claim_name=2, claim_namespace=3, claim_resources=4 (field 1 was removed in 1.31)."""
    b = budget or Budget()
    f = b.gather(data, (2, 3, 4))
    return DynamicResource(last_text(f[2]), last_text(f[3]), tuple(decode_claim_resource(message(v), b) for v in f[4]))


def decode_container(data: memoryview, budget: Budget | None = None) -> ContainerResources:
    """ContainerResources: name=1, devices=2, dynamic_resources=5 (cpu_ids=3 and memory=4 are skipped)."""
    b = budget or Budget()
    f = b.gather(data, (1, 2, 5))
    devices = tuple(decode_container_devices(message(v), b) for v in f[2])
    return ContainerResources(last_text(f[1]), devices, tuple(decode_dynamic_resource(message(v), b) for v in f[5]))


def decode_pod(data: memoryview, budget: Budget | None = None) -> PodResources:
    """PodResources: name=1, namespace=2, containers=3."""
    b = budget or Budget()
    f = b.gather(data, (1, 2, 3))
    return PodResources(last_text(f[1]), last_text(f[2]), tuple(decode_container(message(v), b) for v in f[3]))


def decode_list_response(data: bytes) -> list[PodResources]:
    """ListPodResourcesResponse -> pods (field 1, repeated PodResources); at most ``MAX_ENTRIES`` entries."""
    b = Budget()
    return [decode_pod(message(v), b) for v in b.gather(data, (1,))[1]]


def decode_allocatable_response(data: bytes) -> list[ContainerDevices]:
    """AllocatableResourcesResponse -> the node's devices (field 1, repeated ContainerDevices); at most
    ``MAX_ENTRIES`` entries."""
    b = Budget()
    return [decode_container_devices(message(v), b) for v in b.gather(data, (1,))[1]]


def check_socket(path: str) -> None:
    """Raise PodResourcesError unless ``path`` is a unix socket (never dial a missing socket)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PodResourcesError(
            f"pod-resources socket {path} not found (is /var/lib/kubelet/pod-resources mounted?)"
        ) from None
    except OSError as e:
        raise PodResourcesError(f"pod-resources socket {path}: {e.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise PodResourcesError(f"pod-resources socket {path} is not a unix socket")


class PodResourcesClient:
    """One gRPC channel to the kubelet socket, reused across calls; ``close()`` releases it."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: float = 5.0) -> None:
        try:
            import grpc  # optional dependency (extra "k8s"), needed only with --k8s-info
        except ImportError:
            raise PodResourcesError("pod attribution needs grpcio: pip install 'neuron-monitor[k8s]'") from None
        self._grpc: Any = grpc
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel: Any = None

    def _call(self, method: str) -> bytes:
        check_socket(self.socket_path)
        grpc = self._grpc
        if self._channel is None:
            self._channel = grpc.insecure_channel(
                "unix://" + os.path.abspath(self.socket_path),
                options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
            )
        call = self._channel.unary_unary(f"{SERVICE}/{method}")
        try:
            answer: bytes = call(b"", timeout=self.timeout)
            return answer
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            details = e.details() if hasattr(e, "details") else str(e)
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self.close()  # dial afresh next time: the kubelet may have restarted
            name = code.name if code is not None else "error"
            raise PodResourcesError(f"pod-resources {method} failed: {name}: {details}", name) from None

    def list_pods(self) -> list[PodResources]:
        raw = self._call("List")
        try:
            return decode_list_response(raw)
        except WireError as e:
            raise PodResourcesError(f"pod-resources List: malformed response: {e}") from None

    def allocatable(self) -> list[ContainerDevices] | None:
        """The node's allocatable devices, or None when the kubelet does not implement the call."""
        try:
            raw = self._call("GetAllocatableResources")
        except PodResourcesError as e:
            if e.code == "UNIMPLEMENTED":
                return None
            raise
        try:
            return decode_allocatable_response(raw)
        except WireError as e:
            raise PodResourcesError(f"pod-resources GetAllocatableResources: malformed response: {e}") from None

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
