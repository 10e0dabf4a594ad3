"""Pod-resources allocations -> neuron_k8s_info core and device maps."""

from __future__ import annotations

from neuron_monitor.k8s.attribution import attribute, cores_per_device_from, parse_index
from neuron_monitor.k8s.podresources import ContainerDevices, ContainerResources, PodResources

CORE = "aws.amazon.com/neuroncore"
DEVICE = "aws.amazon.com/neuron"


def pod(name: str, ns: str, *containers: tuple[str, list[tuple[str, list[str]]]]) -> PodResources:
    return PodResources(
        name,
        ns,
        tuple(
            ContainerResources(c, tuple(ContainerDevices(r, tuple(ids)) for r, ids in devs)) for c, devs in containers
        ),
    )


def entry(pod_name: str, ns: str, *containers: str) -> dict:
    return {"pod_name": pod_name, "namespace": ns, "container_name": list(containers)}


def test_core_allocations_map_cores_and_their_device() -> None:
    a = attribute([pod("train-0", "ml", ("worker", [(CORE, ["2", "3"])]))], cores_per_device=2)
    assert a.cores == {"2": entry("train-0", "ml", "worker"), "3": entry("train-0", "ml", "worker")}
    assert a.devices == {"1": entry("train-0", "ml", "worker")}


def test_device_allocations_cover_every_core_of_the_device() -> None:
    a = attribute([pod("infer", "default", ("server", [(DEVICE, ["1"])]))], cores_per_device=4)
    assert sorted(a.cores, key=int) == ["4", "5", "6", "7"]
    assert a.devices == {"1": entry("infer", "default", "server")}


def test_without_cores_per_device_only_the_allocated_kind_is_mapped() -> None:
    a = attribute([pod("p", "n", ("c", [(DEVICE, ["0"]), (CORE, ["9"])]))], cores_per_device=None)
    assert a.devices == {"0": entry("p", "n", "c")}
    assert a.cores == {"9": entry("p", "n", "c")}


def test_containers_of_one_pod_are_listed_together() -> None:
    a = attribute([pod("p", "n", ("b", [(DEVICE, ["0"])]), ("a", [(DEVICE, ["0"])]))], cores_per_device=1)
    assert a.devices["0"]["container_name"] == ["a", "b"]
    assert a.conflicts == 0


def test_device_whose_cores_several_pods_share_has_no_owner() -> None:
    pods = [pod("a", "n", ("c", [(CORE, ["0"])])), pod("b", "n", ("c", [(CORE, ["1"])]))]
    a = attribute(pods, cores_per_device=2)
    assert a.cores["0"]["pod_name"] == "a" and a.cores["1"]["pod_name"] == "b"
    assert a.devices == {}
    assert a.shared_devices == [0]


def test_conflicting_claims_keep_the_first_pod_and_are_counted() -> None:
    pods = [pod("zeta", "n", ("c", [(CORE, ["0"])])), pod("alpha", "n", ("c", [(CORE, ["0"])]))]
    a = attribute(pods, cores_per_device=None)
    assert a.cores["0"]["pod_name"] == "alpha"
    assert a.conflicts == 1


def test_non_integer_ids_and_out_of_bound_indices_are_skipped_not_guessed() -> None:
    a = attribute([pod("p", "n", ("c", [(CORE, ["nc-1", "1", " 2", "-3", "٣", "99999"])]))], cores_per_device=None)
    assert a.cores == {"1": entry("p", "n", "c")}
    assert len(a.skipped_ids) == 5


def test_other_resources_are_ignored() -> None:
    a = attribute([pod("p", "n", ("c", [("nvidia.com/gpu", ["0"]), ("cpu", ["1"])]))], cores_per_device=2)
    assert a.cores == {} and a.devices == {} and a.skipped_ids == []


def test_parse_index() -> None:
    assert parse_index("0") == 0
    assert parse_index("0127") == 127
    assert parse_index("4096") is None
    assert parse_index("") is None
    assert parse_index("1e3") is None


def test_cores_per_device_inferred_from_allocatable() -> None:
    alloc = [ContainerDevices(DEVICE, ("0", "1")), ContainerDevices(CORE, tuple(str(i) for i in range(8)))]
    assert cores_per_device_from(alloc) == 4
    assert cores_per_device_from([ContainerDevices(CORE, ("0", "1", "2"))]) is None
    assert (
        cores_per_device_from([ContainerDevices(DEVICE, ("0", "1")), ContainerDevices(CORE, ("0", "1", "2"))]) is None
    )
    assert cores_per_device_from(None) is None
