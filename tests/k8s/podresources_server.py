"""A local kubelet pod-resources server for tests: the real gRPC service on a unix socket.

Its messages come from neuron_monitor/k8s/podresources.proto compiled with grpcio-tools (protoc) at test
time, so the hand-written decoder in neuron_monitor.k8s.podresources is checked against protobuf's own encoder.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
from grpc_tools import protoc

PROTO = Path(__file__).resolve().parents[2] / "neuron_monitor" / "k8s" / "podresources.proto"
_compiled: tuple[ModuleType, ModuleType] | None = None
_lock = threading.Lock()


def compiled() -> tuple[ModuleType, ModuleType]:
    """(podresources_pb2, podresources_pb2_grpc), generated once per test session."""
    global _compiled
    with _lock:
        if _compiled is None:
            out = Path(tempfile.mkdtemp(prefix="nm-proto-"))
            include = str(Path(protoc.__file__).parent / "_proto")
            rc = protoc.main(
                [
                    "protoc",
                    f"-I{PROTO.parent}",
                    f"-I{include}",
                    f"--python_out={out}",
                    f"--grpc_python_out={out}",
                    str(PROTO),
                ]
            )
            assert rc == 0, "protoc failed on podresources.proto"
            sys.path.insert(0, str(out))
            _compiled = (importlib.import_module("podresources_pb2"), importlib.import_module("podresources_pb2_grpc"))
        return _compiled


class FakeKubelet:
    """Serves List and GetAllocatableResources from ``pods`` and ``allocatable`` (plain Python data).

    ``pods``: [{"name", "namespace", "containers": [{"name", "devices": [(resource, [ids])],
               "claims": [{"name", "namespace", "devices": [(driver, pool, device)]}]}]}]
    ``allocatable``: [(resource, [ids])], or None to answer UNIMPLEMENTED like an old kubelet.
    ``fail_with``: a grpc.StatusCode to fail every call with (``fail_details`` its message). ``delay``: seconds List
    waits before it answers.
    """

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.pods: list[dict[str, Any]] = []
        self.allocatable: list[tuple[str, list[str]]] | None = []
        self.fail_with: grpc.StatusCode | None = None
        self.fail_details = "kubelet says no"
        self.delay = 0.0  # seconds every call waits before it answers (or until ``stop``)
        self._stopping = threading.Event()
        self.calls: dict[str, int] = {"List": 0, "GetAllocatableResources": 0}
        pb2, pb2_grpc = compiled()
        self._pb2 = pb2
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb2_grpc.add_PodResourcesListerServicer_to_server(self._servicer(pb2_grpc), self._server)
        self._server.add_insecure_port(f"unix://{socket_path}")

    def _devices(self, devices: list[tuple[str, list[str]]]) -> list[Any]:
        pb2 = self._pb2
        return [
            pb2.ContainerDevices(
                resource_name=res, device_ids=ids, topology=pb2.TopologyInfo(nodes=[pb2.NUMANode(ID=0)])
            )
            for res, ids in devices
        ]

    def _claims(self, claims: list[dict[str, Any]]) -> list[Any]:
        pb2 = self._pb2
        return [
            pb2.DynamicResource(
                claim_name=c["name"],
                claim_namespace=c.get("namespace", ""),
                claim_resources=[
                    pb2.ClaimResource(
                        cdi_devices=[pb2.CDIDevice(name=f"k8s.{driver}/neuron={device}")],
                        driver_name=driver,
                        pool_name=pool,
                        device_name=device,
                        share_id="",
                    )
                    for driver, pool, device in c.get("devices", [])
                ],
            )
            for c in claims
        ]

    def _servicer(self, pb2_grpc: ModuleType) -> Any:
        fake = self
        pb2 = self._pb2

        class Servicer(pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc,name-defined]
            def List(self, request: Any, context: Any) -> Any:
                fake.calls["List"] += 1
                fake._stopping.wait(fake.delay)
                if fake.fail_with is not None:
                    context.abort(fake.fail_with, fake.fail_details)
                pods = [
                    pb2.PodResources(
                        name=p["name"],
                        namespace=p["namespace"],
                        containers=[
                            pb2.ContainerResources(
                                name=c["name"],
                                devices=fake._devices(c.get("devices", [])),
                                cpu_ids=[2, 3],
                                memory=[pb2.ContainerMemory(memory_type="memory", size=1 << 30)],
                                dynamic_resources=fake._claims(c.get("claims", [])),
                            )
                            for c in p.get("containers", [])
                        ],
                    )
                    for p in fake.pods
                ]
                return pb2.ListPodResourcesResponse(pod_resources=pods)

            def GetAllocatableResources(self, request: Any, context: Any) -> Any:
                fake.calls["GetAllocatableResources"] += 1
                if fake.fail_with is not None:
                    context.abort(fake.fail_with, fake.fail_details)
                if fake.allocatable is None:
                    context.abort(grpc.StatusCode.UNIMPLEMENTED, "old kubelet")
                return pb2.AllocatableResourcesResponse(devices=fake._devices(fake.allocatable), cpu_ids=[0, 1, 2, 3])

        return Servicer()

    def start(self) -> FakeKubelet:
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.stop(grace=None).wait()
