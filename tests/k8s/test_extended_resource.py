"""KEP-5004 (DRA extended resources, stable in Kubernetes 1.37): a pod that asks for ``aws.amazon.com/neuron`` on a
DRA node gets its devices through a ResourceClaim the scheduler generates for it (its name in the pod's
``status.extendedResourceClaimStatus.resourceClaimName``), and the kubelet's pod-resources ``List`` reports that
allocation in ``dynamic_resources`` like any claim. Such pods are attributed exactly like ResourceClaim pods: a
real gRPC kubelet stand-in serving the allocation, with and without the stand-in API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.k8s.dra import DraDirectory
from neuron_monitor.k8s.kubeapi import KubeApi
from neuron_monitor.k8s.pod_info import PodInfoWatcher

from .apiserver_stub import StubApiServer
from .podresources_server import FakeKubelet
from .test_pod_info_dra import DRIVER, NODE, TOKEN, claim, entry, resource_claim, resource_slice, slice_device

SPECIAL = "train-0-extended-resources-7tq2m"  # a scheduler-generated claim name (pod name + suffix)


def extended_resource_pods() -> list[dict[str, Any]]:
    return [
        {  # two containers asking for aws.amazon.com/neuron: 1 and 2 devices, one generated claim for the pod
            "name": "train-0",
            "namespace": "ml",
            "containers": [
                {"name": "trainer", "claims": [claim(SPECIAL, "ml", "neurondevice4")]},
                {"name": "eval", "claims": [claim(SPECIAL, "ml", "neurondevice5", "neurondevice6")]},
            ],
        },
        {  # an ordinary ResourceClaim pod on the same node
            "name": "pod0",
            "namespace": "ml",
            "containers": [{"name": "ctr0", "claims": [claim("pod0-neurons-zdk76", "ml", "neurondevice2")]}],
        },
    ]


@pytest.fixture
def api() -> Iterator[StubApiServer]:
    server = StubApiServer(token=TOKEN).start()
    yield server
    server.stop()


def refresh(kubelet: FakeKubelet, directory: DraDirectory | None = None) -> dict[str, Any]:
    w = PodInfoWatcher(kubelet.socket_path, cores_per_device=4, directory=directory)
    w.set_node_shape(16, 2)
    try:
        return w.refresh_once()
    finally:
        w.close()


def test_extended_resource_pods_are_attributed_like_claim_pods(kubelet: FakeKubelet) -> None:
    kubelet.pods = extended_resource_pods()
    info = refresh(kubelet)
    assert info["error"] == ""
    devices = info["neurondevices_k8s_info"]
    assert devices["4"] == entry("train-0", SPECIAL, ctr="trainer")
    assert devices["5"] == devices["6"] == entry("train-0", SPECIAL, ctr="eval")
    assert devices["2"] == entry("pod0", "pod0-neurons-zdk76")
    cores = info["neuroncores_k8s_info"]
    assert [k for k, v in cores.items() if v["container_name"] == ["eval"]] == [str(c) for c in range(20, 28)]


def test_with_the_api_server_the_generated_claim_gives_the_pod_uid(
    kubelet: FakeKubelet, api: StubApiServer, tmp_path: Path
) -> None:
    kubelet.pods = extended_resource_pods()
    api.slices = [resource_slice(NODE, [slice_device(f"neurondevice{i}", i) for i in range(16)])]
    special = resource_claim(SPECIAL, "ml", {"train-0": "uid-train-0"}, [], lnc=None)
    special["status"]["allocation"]["devices"]["results"] = [
        {"request": request, "driver": DRIVER, "pool": NODE, "device": device}
        for request, device in (
            ("container-0-request-0", "neurondevice4"),
            ("container-1-request-0", "neurondevice5"),
            ("container-1-request-0", "neurondevice6"),
        )
    ]
    api.claims[("ml", SPECIAL)] = special
    api.claims[("ml", "pod0-neurons-zdk76")] = resource_claim(
        "pod0-neurons-zdk76", "ml", {"pod0": "uid-pod0"}, ["neurondevice2"], lnc=None
    )
    token = tmp_path / "token"
    token.write_text(TOKEN)
    info = refresh(kubelet, DraDirectory(KubeApi(api.url, str(token), None, timeout=5.0), DRIVER, NODE))
    assert info["error"] == ""
    devices = info["neurondevices_k8s_info"]
    assert devices["4"] == entry("train-0", SPECIAL, uid="uid-train-0", ctr="trainer")
    assert devices["6"] == entry("train-0", SPECIAL, uid="uid-train-0", ctr="eval")
    assert devices["2"] == entry("pod0", "pod0-neurons-zdk76", uid="uid-pod0")
