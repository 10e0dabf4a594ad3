"""PodInfoWatcher on a DRA node: a real gRPC pod-resources server on a unix socket serving DRA claims (beside
device-plugin devices, claims of other drivers and malformed device names), and a stand-in API server (HTTP on
loopback) serving ResourceSlices and ResourceClaims."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.k8s.dra import DraDirectory
from neuron_monitor.k8s.kubeapi import KubeApi
from neuron_monitor.k8s.pod_info import PodInfoWatcher
from neuron_monitor.neuron import pci

from .apiserver_stub import StubApiServer
from .podresources_server import FakeKubelet

DRIVER = "neuron.aws.com"
NODE = "ip-10-0-1-7.us-west-2.compute.internal"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.sig"


def claim(name: str, ns: str, *devices: str, driver: str = DRIVER, pool: str = NODE) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "devices": [(driver, pool, d) for d in devices]}


def dra_pods() -> list[dict[str, Any]]:
    return [
        {
            "name": "pod0",
            "namespace": "ml",
            "containers": [{"name": "ctr0", "claims": [claim("pod0-neurons-zdk76", "ml", "neurondevice2")]}],
        },
        {
            "name": "pod1",
            "namespace": "ml",
            "containers": [{"name": "ctr0", "claims": [claim("pod1-neurons-q8x2p", "ml", "neuron-device-3")]}],
        },
        {  # a GPU claim on the same node: another driver, ignored
            "name": "cuda",
            "namespace": "gpu",
            "containers": [{"name": "c", "claims": [claim("cuda-gpu", "gpu", "gpu-0", driver="gpu.nvidia.com")]}],
        },
        {  # a device-plugin pod on the same node (migration)
            "name": "legacy",
            "namespace": "old",
            "containers": [{"name": "c", "devices": [("aws.amazon.com/neuron", ["0"])]}],
        },
    ]


def entry(pod: str, claim_name: str, ns: str = "ml", uid: str | None = None, ctr: str = "ctr0") -> dict[str, Any]:
    out: dict[str, Any] = {"pod_name": pod, "namespace": ns, "container_name": [ctr]}
    if uid is not None:
        out["pod_uid"] = uid
    out["claim_name"] = claim_name
    out["claim_namespace"] = ns
    return out


def watcher(kubelet: FakeKubelet, directory: DraDirectory | None = None, lnc: int = 2) -> PodInfoWatcher:
    w = PodInfoWatcher(kubelet.socket_path, cores_per_device=4, directory=directory)
    w.set_node_shape(16, lnc)
    return w


def test_claims_are_attributed_by_device_name_without_the_api(kubelet: FakeKubelet) -> None:
    kubelet.pods = dra_pods()
    w = watcher(kubelet)
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert info["error"] == ""
    devices = info["neurondevices_k8s_info"]
    assert devices["2"] == entry("pod0", "pod0-neurons-zdk76")
    assert devices["3"] == entry("pod1", "pod1-neurons-q8x2p")
    assert devices["0"] == {"pod_name": "legacy", "namespace": "old", "container_name": ["c"]}
    assert set(devices) == {"0", "2", "3"}
    cores = info["neuroncores_k8s_info"]
    assert [k for k, v in cores.items() if v["pod_name"] == "pod0"] == ["8", "9", "10", "11"]
    assert [k for k, v in cores.items() if v["pod_name"] == "legacy"] == ["0", "1", "2", "3"]
    assert w.stats["dra_devices"] == 2


def test_malformed_device_names_are_named_in_error_and_nothing_else_is_lost(kubelet: FakeKubelet) -> None:
    pods = dra_pods()
    pods.append(
        {
            "name": "odd",
            "namespace": "ml",
            "containers": [{"name": "c", "claims": [claim("odd-claim", "ml", "neurondevice-x", "chip\x1b[2J7")]}],
        }
    )
    kubelet.pods = pods
    w = watcher(kubelet)
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert "claim ml/odd-claim: device 'neurondevice-x'" in info["error"]
    assert "API server not used" in info["error"]
    assert "\x1b" not in info["error"]  # device names reach the error line cleaned
    assert set(info["neurondevices_k8s_info"]) == {"0", "2", "3"}
    assert w.stats["dra_unresolved"] == 2


@pytest.fixture
def api() -> Iterator[StubApiServer]:
    server = StubApiServer(token=TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


def slice_device(name: str, device_id: int, rtype: str = "neuron_device") -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "deviceId": {"int": device_id},
            "instanceType": {"string": "trn2.48xlarge"},
            "neuronDriverVersion": {"string": "2.25.4.0"},
            "resourceType": {"string": rtype},
        },
    }


def resource_slice(node: str, devices: list[dict[str, Any]], driver: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-abcde"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def resource_claim(name: str, ns: str, pods: dict[str, str], devices: list[str], lnc: int | None) -> dict[str, Any]:
    config = []
    if lnc is not None:
        params = {"apiVersion": "neuron.aws.com/v1", "kind": "NeuronConfig", "logicalNeuronCore": lnc}
        config.append(
            {"source": "FromClaim", "requests": ["neurons"], "opaque": {"driver": DRIVER, "parameters": params}}
        )
    results = [{"request": "neurons", "driver": DRIVER, "pool": NODE, "device": d} for d in devices]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"claim-{name}"},
        "status": {
            "allocation": {"devices": {"results": results, "config": config}},
            "reservedFor": [{"resource": "pods", "name": p, "uid": u} for p, u in pods.items()],
        },
    }


def directory(api: StubApiServer, token_file: str, node: str = NODE) -> DraDirectory:
    return DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0), DRIVER, node)


def test_device_id_lnc_and_pod_uid_come_from_the_api_server(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the DRA driver's device names carry no index here: only the ResourceSlice knows the device
    kubelet.pods = [
        {"name": "pod0", "namespace": "ml", "containers": [{"name": "ctr0", "claims": [claim("c0", "ml", "dev-a")]}]},
        {"name": "pod1", "namespace": "ml", "containers": [{"name": "ctr0", "claims": [claim("c1", "ml", "dev-b")]}]},
        {  # admin access: a monitoring pod sees dev-b too, but does not own it
            "name": "mon",
            "namespace": "ops",
            "containers": [{"name": "m", "claims": [claim("mon-all", "ops", "dev-b")]}],
        },
    ]
    api.slices = [
        resource_slice(NODE, [slice_device("dev-a", 5), slice_device("dev-b", 6)]),
        resource_slice("another-node", [slice_device("dev-a", 0)]),
        resource_slice(NODE, [slice_device("gpu-0", 0)], driver="gpu.nvidia.com"),
    ]
    api.claims[("ml", "c0")] = resource_claim("c0", "ml", {"pod0": "uid-pod0"}, ["dev-a"], lnc=1)
    api.claims[("ml", "c1")] = resource_claim("c1", "ml", {"pod1": "uid-pod1"}, ["dev-b"], lnc=None)
    admin = resource_claim("mon-all", "ops", {"mon": "uid-mon"}, ["dev-b"], lnc=None)
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    api.claims[("ops", "mon-all")] = admin
    caplog.set_level(logging.DEBUG)
    w = watcher(kubelet, directory(api, token_file), lnc=2)
    try:
        info = w.refresh_once()
        again = w.refresh_once()
    finally:
        w.close()
    assert info["error"] == ""
    devices = info["neurondevices_k8s_info"]
    assert devices == {"5": entry("pod0", "c0", uid="uid-pod0"), "6": entry("pod1", "c1", uid="uid-pod1")}
    cores = info["neuroncores_k8s_info"]
    # c0 runs at LNC=1 on a node at LNC=2 (4 logical cores per device): 8 cores per device for its device
    assert [k for k, v in cores.items() if v["claim_name"] == "c0"] == [str(c) for c in range(40, 48)]
    assert [k for k, v in cores.items() if v["claim_name"] == "c1"] == [str(c) for c in range(24, 28)]
    assert again["neurondevices_k8s_info"] == devices
    # one slice list and one get per claim, cached across refreshes; only this node's slices were asked for
    assert api.count("/resourceslices") == 1 and api.count("/resourceclaims/") == 3
    selector = next(q for p, q, _ in api.requests if p.endswith("/resourceslices"))["fieldSelector"][0]
    assert selector == f"spec.driver={DRIVER},spec.nodeName={NODE}"
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in api.requests)
    assert TOKEN not in caplog.text


def test_slices_listed_in_pages(kubelet: FakeKubelet, api: StubApiServer, token_file: str) -> None:
    kubelet.pods = [{"name": "p", "namespace": "ml", "containers": [{"name": "c", "claims": [claim("c", "ml", "d9")]}]}]
    api.slices = [resource_slice(NODE, [slice_device(f"d{i}", i)]) for i in range(10)]
    for s in api.slices:  # one pool in ten slices of the same generation
        s["spec"]["pool"]["resourceSliceCount"] = 10
    api.page_size = 3
    w = watcher(kubelet, directory(api, token_file))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert set(info["neurondevices_k8s_info"]) == {"9"}
    assert api.count("/resourceslices") == 4


def test_older_api_version_is_used_when_v1_is_not_served(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str
) -> None:
    kubelet.pods = [{"name": "p", "namespace": "ml", "containers": [{"name": "c", "claims": [claim("c", "ml", "x")]}]}]
    api.slices = [resource_slice(NODE, [slice_device("x", 4)])]
    api.claims[("ml", "c")] = resource_claim("c", "ml", {"p": "uid-p"}, ["x"], lnc=None)
    api.missing_versions = {"v1"}
    w = watcher(kubelet, directory(api, token_file))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert set(info["neurondevices_k8s_info"]) == {"4"} and info["error"] == ""
    assert any("/v1beta2/resourceslices" in p for p, _, _ in api.requests)


def test_ultraserver_node_device_covers_every_device(kubelet: FakeKubelet, api: StubApiServer, token_file: str) -> None:
    kubelet.pods = [
        {"name": "vllm-0", "namespace": "ml", "containers": [{"name": "c", "claims": [claim("us", "ml", "node0")]}]}
    ]
    api.slices = [resource_slice(NODE, [slice_device("node0", 0, rtype="neuron_node")])]
    w = watcher(kubelet, directory(api, token_file))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert sorted(info["neurondevices_k8s_info"], key=int) == [str(i) for i in range(16)]
    assert len(info["neuroncores_k8s_info"]) == 64


def test_forbidden_api_falls_back_to_names_and_says_so(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.pods = dra_pods()
    api.status = 403
    caplog.set_level(logging.DEBUG)
    w = watcher(kubelet, directory(api, token_file))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert set(info["neurondevices_k8s_info"]) == {"0", "2", "3"}  # by name: nothing lost
    assert "pod_uid" not in info["neurondevices_k8s_info"]["2"]
    assert "API server: resourceslices: GET /apis/resource.k8s.io/v1/resourceslices: HTTP 403" in info["error"]
    assert "forbidden" in info["error"]
    assert TOKEN not in info["error"] and TOKEN not in caplog.text


def test_wrong_token_is_reported_without_the_token(kubelet: FakeKubelet, api: StubApiServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token")
    kubelet.pods = dra_pods()
    w = watcher(kubelet, directory(api, str(bad)))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert "HTTP 401" in info["error"] and "not-the-token" not in info["error"]


def test_no_api_traffic_without_dra_claims(kubelet: FakeKubelet, api: StubApiServer, token_file: str) -> None:
    kubelet.pods = [p for p in dra_pods() if p["name"] == "legacy"]
    w = watcher(kubelet, directory(api, token_file))
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert info["error"] == "" and api.requests == []


def test_api_error_stays_while_its_answer_is_missing_and_clears_after(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str
) -> None:
    kubelet.pods = [p for p in dra_pods() if p["name"] == "pod0"]
    api.slices = [resource_slice(NODE, [slice_device("neurondevice2", 2)])]
    api.claims[("ml", "pod0-neurons-zdk76")] = resource_claim(
        "pod0-neurons-zdk76", "ml", {"pod0": "uid-pod0"}, ["neurondevice2"], lnc=None
    )
    now = [0.0]
    d = DraDirectory(KubeApi(api.url, token_file, None, timeout=5.0), DRIVER, NODE, clock=lambda: now[0])
    w = watcher(kubelet, d)
    try:
        api.status = 503
        first = w.refresh_once()
        now[0] += 15  # within the cache's 60 s: nothing is asked again, the error stays
        asked = len(api.requests)
        second = w.refresh_once()
        assert len(api.requests) == asked
        api.status = 0
        now[0] += 60
        third = w.refresh_once()
    finally:
        w.close()
    for info in (first, second):
        assert "HTTP 503" in info["error"] and "pod_uid" not in info["neurondevices_k8s_info"]["2"]
    assert third["error"] == "" and third["neurondevices_k8s_info"]["2"]["pod_uid"] == "uid-pod0"


def test_https_with_the_cluster_ca(kubelet: FakeKubelet, token_file: str, tmp_path: Path) -> None:
    from tests.exporters.prometheus.prom_process import make_certificate

    cert, key = make_certificate(tmp_path)
    other, _ = make_certificate(tmp_path, "other")
    api = StubApiServer(token=TOKEN, tls=(str(cert), str(key))).start()
    try:
        kubelet.pods = [
            {"name": "p", "namespace": "ml", "containers": [{"name": "c", "claims": [claim("c", "ml", "x")]}]}
        ]
        api.slices = [resource_slice(NODE, [slice_device("x", 3)])]
        api.claims[("ml", "c")] = resource_claim("c", "ml", {"p": "uid-p"}, ["x"], lnc=None)
        good = DraDirectory(KubeApi(api.url, token_file, str(cert), timeout=5.0), DRIVER, NODE)
        w = watcher(kubelet, good)
        try:
            info = w.refresh_once()
        finally:
            w.close()
        assert info["error"] == "" and info["neurondevices_k8s_info"]["3"]["pod_uid"] == "uid-p"
        # a server the cluster CA did not sign gets no token and no trust
        seen = len(api.requests)
        wrong = DraDirectory(KubeApi(api.url, token_file, str(other), timeout=5.0), DRIVER, NODE)
        w = watcher(kubelet, wrong)
        try:
            refused = w.refresh_once()
        finally:
            w.close()
        assert "CERTIFICATE_VERIFY_FAILED" in refused["error"] and len(api.requests) == seen
        assert set(refused["neurondevices_k8s_info"]) == set()  # "x" has no index in its name
    finally:
        api.stop()


def test_ultraserver_node_device_without_a_device_count_is_named(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str
) -> None:
    node_claim = claim("us", "ml", "node0")
    kubelet.pods = [
        {"name": "vllm-0", "namespace": "ml", "containers": [{"name": n, "claims": [node_claim]} for n in ("a", "b")]}
    ]
    api.slices = [resource_slice(NODE, [slice_device("node0", 0, rtype="neuron_node")])]
    w = PodInfoWatcher(kubelet.socket_path, directory=directory(api, token_file))  # no device count known
    try:
        info = w.refresh_once()
    finally:
        w.close()
    assert info["neurondevices_k8s_info"] == {}
    assert info["error"].count("UltraServer node device, and the node's device count is unknown") == 1


def test_slices_publish_each_devices_efa_adapter_for_the_join(
    kubelet: FakeKubelet, api: StubApiServer, token_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pci, "_dra_efa", {})
    kubelet.pods = [
        {"name": "pod0", "namespace": "ml", "containers": [{"name": "ctr0", "claims": [claim("c0", "ml", "dev-a")]}]}
    ]
    with_efa = slice_device("dev-a", 5)
    with_efa["attributes"]["resource.aws.com/devicegroup1_id"] = {"string": "0000:10:1c.0"}
    api.slices = [resource_slice(NODE, [with_efa, slice_device("dev-b", 6)])]
    api.claims[("ml", "c0")] = resource_claim("c0", "ml", {"pod0": "uid-pod0"}, ["dev-a"], lnc=None)
    w = watcher(kubelet, directory(api, token_file))
    try:
        w.refresh_once()
    finally:
        w.close()
    assert pci.dra_efa_addresses() == {5: "0000:10:1c.0"}
