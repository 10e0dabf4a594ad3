"""DRA: device names, ResourceSlice and ResourceClaim parsing, and DRA devices in the attribution maps."""

from __future__ import annotations

from typing import Any

import pytest

from neuron_monitor.k8s.attribution import DraDevice, attribute
from neuron_monitor.k8s.dra import (
    EFA_GROUP_ATTRIBUTE,
    ClaimDetails,
    SliceDevice,
    efa_addresses,
    index_from_name,
    is_object_name,
    parse_claim,
    parse_slices,
)
from neuron_monitor.k8s.podresources import ContainerDevices, ContainerResources, PodResources

DRIVER = "neuron.aws.com"
NODE = "ip-10-0-1-7.us-west-2.compute.internal"


def slice_obj(devices: list[dict[str, Any]], pool: str = NODE, generation: int = 1, driver: str = DRIVER) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{pool}-{driver}-x1"},
        "spec": {
            "driver": driver,
            "nodeName": pool,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device(name: str, device_id: object, rtype: str = "neuron_device") -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "deviceId": {"int": device_id},
            "instanceType": {"string": "trn2.48xlarge"},
            "resourceType": {"string": rtype},
            "resource.aws.com/devicegroup1_id": {"string": "0000:10:1c.0"},
        },
    }


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("neurondevice0", 0),
        ("neurondevice15", 15),
        ("neuron-device-3", 3),
        ("neurondevice", None),
        ("neuron-device-", None),
        ("neurondevice-1", None),
        ("neurondevice1a", None),
        ("gpu-0", None),
        ("neurondevice٣", None),
        ("neurondevice99999", None),
        ("neurondevice 1", None),
        ("xneurondevice1", None),
    ],
)
def test_index_from_name_takes_only_the_two_documented_forms(name: str, index: int | None) -> None:
    assert index_from_name(name) == index


def test_object_names() -> None:
    assert is_object_name("pod0-neurons-zdk76")
    assert not is_object_name("../secrets")
    assert not is_object_name("Upper")
    assert not is_object_name("a" * 254)
    assert not is_object_name("")


def test_slices_map_pool_and_device_to_device_id() -> None:
    out: dict[tuple[str, str], SliceDevice] = {}
    items = [
        slice_obj([device("neurondevice0", 0), device("dev-b", 5), device("weird", "7"), device("neg", -1)]),
        slice_obj([device("x", 1)], driver="gpu.nvidia.com"),
        "not an object",
        {"spec": {"driver": DRIVER, "devices": "nope"}},
    ]
    parse_slices(items, DRIVER, out, {})
    assert out[(NODE, "neurondevice0")] == SliceDevice(0, "neuron_device", "0000:10:1c.0")
    assert out[(NODE, "dev-b")].device_id == 5
    assert out[(NODE, "weird")].device_id is None  # a string is not an int attribute
    assert out[(NODE, "neg")].device_id is None
    assert (NODE, "x") not in out


def test_slices_keep_only_the_newest_pool_generation() -> None:
    out: dict[tuple[str, str], SliceDevice] = {}
    gen: dict[str, int] = {}
    parse_slices([slice_obj([device("old", 1)], generation=3)], DRIVER, out, gen)
    parse_slices([slice_obj([device("new", 2)], generation=4)], DRIVER, out, gen)
    parse_slices([slice_obj([device("older", 3)], generation=2)], DRIVER, out, gen)
    assert list(out) == [(NODE, "new")]


def test_slice_attributes_qualified_with_the_driver_domain_and_v1beta1_shape() -> None:
    out: dict[tuple[str, str], SliceDevice] = {}
    beta = {"name": "d9", "basic": {"attributes": {"neuron.aws.com/deviceId": {"int": 9}}}}
    parse_slices([slice_obj([beta])], DRIVER, out, {})
    assert out[(NODE, "d9")].device_id == 9


def claim_obj(lnc: int | None = 1, admin: bool = False) -> dict[str, Any]:
    config = []
    if lnc is not None:
        config.append(
            {
                "source": "FromClaim",
                "requests": ["neurons"],
                "opaque": {
                    "driver": DRIVER,
                    "parameters": {"apiVersion": "neuron.aws.com/v1", "kind": "NeuronConfig", "logicalNeuronCore": lnc},
                },
            }
        )
    return {
        "metadata": {"name": "pod0-neurons-zdk76", "namespace": "ml", "uid": "c-uid"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "neurons", "driver": DRIVER, "pool": NODE, "device": "neurondevice2"},
                        {
                            "request": "neurons",
                            "driver": DRIVER,
                            "pool": NODE,
                            "device": "neurondevice3",
                            "adminAccess": admin,
                        },
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"},
                    ],
                    "config": config,
                }
            },
            "reservedFor": [
                {"resource": "pods", "name": "pod0", "uid": "1f0e-pod0"},
                {"apiGroup": "apps", "resource": "deployments", "name": "x", "uid": "nope"},
            ],
        },
    }


def test_claim_gives_pod_uids_lnc_per_device_and_admin_devices() -> None:
    details = parse_claim(claim_obj(lnc=1, admin=True), DRIVER)
    assert details.uid == "c-uid"
    assert details.pod_uids == {"pod0": "1f0e-pod0"}
    assert details.lnc == {(DRIVER, NODE, "neurondevice2"): 1, (DRIVER, NODE, "neurondevice3"): 1}
    assert details.admin == {(DRIVER, NODE, "neurondevice3")}


@pytest.mark.parametrize("obj", [None, [], "x", {"status": {"allocation": {"devices": {"results": "x"}}}}])
def test_malformed_claims_give_empty_details(obj: object) -> None:
    assert parse_claim(obj, DRIVER) == ClaimDetails()


def test_lnc_out_of_range_or_other_kind_is_ignored() -> None:
    obj = claim_obj(lnc=1)
    obj["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["logicalNeuronCore"] = 99
    assert parse_claim(obj, DRIVER).lnc == {}
    obj["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"] = {
        "kind": "UltraServerConfig",
        "ultraserverMode": 4,
    }
    assert parse_claim(obj, DRIVER).lnc == {}


# -- attribution with DRA devices ------------------------------------------------------------------------------


def plugin_pod(name: str, ns: str, resource: str, ids: list[str]) -> PodResources:
    return PodResources(name, ns, (ContainerResources("c", (ContainerDevices(resource, tuple(ids)),)),))


def test_claimed_device_covers_its_cores_and_carries_the_claim() -> None:
    dra = [DraDevice(2, ("ml", "pod0-neurons-zdk76"), "pod0", "ctr0", "1f0e-pod0")]
    a = attribute([], cores_per_device=4, dra=dra)
    entry = {
        "pod_name": "pod0",
        "namespace": "ml",
        "container_name": ["ctr0"],
        "pod_uid": "1f0e-pod0",
        "claim_name": "pod0-neurons-zdk76",
        "claim_namespace": "ml",
    }
    assert a.devices == {"2": entry}
    assert a.cores == {str(c): entry for c in range(8, 12)}
    assert list(a.devices["2"]) == list(entry)  # AWS's keys first, ours after
    assert a.dra_conflicts == []


def test_claim_lnc_sets_the_cores_of_the_device() -> None:
    dra = [DraDevice(1, ("ml", "c"), "p", "x", cores_per_device=8)]
    a = attribute([], cores_per_device=4, dra=dra)
    assert sorted(a.cores, key=int) == [str(c) for c in range(8, 16)]


def test_pod_uid_left_out_when_unknown() -> None:
    a = attribute([], cores_per_device=None, dra=[DraDevice(0, ("ml", "c"), "p", "x")])
    assert "pod_uid" not in a.devices["0"] and a.cores == {}


def test_pods_sharing_one_claim_share_its_device() -> None:
    dra = [DraDevice(0, ("ml", "shared"), "b", "x", "u-b"), DraDevice(0, ("ml", "shared"), "a", "y", "u-a")]
    a = attribute([], cores_per_device=2, dra=dra)
    assert a.devices["0"]["pod_name"] == "a,b"
    assert a.devices["0"]["pod_uid"] == "u-a,u-b"
    assert a.devices["0"]["container_name"] == ["x", "y"]
    assert a.dra_conflicts == []


def test_one_device_in_two_claims_is_an_error_not_a_guess() -> None:
    dra = [
        DraDevice(0, ("ml", "one"), "a", "x"),
        DraDevice(0, ("ml", "two"), "b", "x"),
        DraDevice(1, ("ml", "one"), "a", "x"),
    ]
    a = attribute([], cores_per_device=2, dra=dra)
    assert "0" not in a.devices and "0" not in a.cores and "1" not in a.cores
    assert a.devices["1"]["pod_name"] == "a"
    assert len(a.dra_conflicts) == 1 and "ml/one" in a.dra_conflicts[0] and "ml/two" in a.dra_conflicts[0]


def test_node_in_migration_attributes_both_ways() -> None:
    pods = [plugin_pod("old", "legacy", "aws.amazon.com/neuron", ["0"])]
    a = attribute(pods, cores_per_device=2, dra=[DraDevice(1, ("ml", "c"), "new", "x")])
    assert a.devices["0"]["pod_name"] == "old" and "claim_name" not in a.devices["0"]
    assert a.devices["1"]["pod_name"] == "new" and a.devices["1"]["claim_name"] == "c"
    assert sorted(a.cores, key=int) == ["0", "1", "2", "3"]
    assert a.dra_conflicts == []


@pytest.mark.parametrize(("resource", "ids"), [("aws.amazon.com/neuron", ["1"]), ("aws.amazon.com/neuroncore", ["3"])])
def test_device_held_through_plugin_and_claim_is_dropped_and_named(resource: str, ids: list[str]) -> None:
    pods = [plugin_pod("old", "legacy", resource, ids), plugin_pod("keep", "legacy", "aws.amazon.com/neuron", ["0"])]
    a = attribute(pods, cores_per_device=2, dra=[DraDevice(1, ("ml", "c"), "new", "x")])
    assert "1" not in a.devices and "2" not in a.cores and "3" not in a.cores
    assert a.devices["0"]["pod_name"] == "keep" and set(a.cores) == {"0", "1"}
    assert len(a.dra_conflicts) == 1
    assert "device plugin (pod old)" in a.dra_conflicts[0] and "ml/c" in a.dra_conflicts[0]


def test_claims_at_different_lnc_that_number_the_same_core_are_dropped() -> None:
    dra = [
        DraDevice(0, ("ml", "lnc1"), "a", "x", cores_per_device=8),
        DraDevice(1, ("ml", "lnc2"), "b", "x", cores_per_device=4),
    ]
    a = attribute([], cores_per_device=4, dra=dra)
    assert a.devices == {} and a.cores == {}
    assert len(a.dra_conflicts) == 2


def test_slice_efa_adapter_address_for_the_efa_join() -> None:
    out: dict[tuple[str, str], SliceDevice] = {}
    good = device("neurondevice3", 3)
    good["attributes"][EFA_GROUP_ATTRIBUTE] = {"string": "0000:A3:00.0"}  # upper-case hex is the same address
    bad = device("neurondevice4", 4)
    bad["attributes"][EFA_GROUP_ATTRIBUTE] = {"string": "9f3a1c"}  # a hash (as devicegroup4_id is): no address
    unindexed = {"name": "x", "attributes": {EFA_GROUP_ATTRIBUTE: {"string": "0000:10:00.0"}}}
    parse_slices([slice_obj([good, bad, unindexed])], DRIVER, out, {})
    assert out[(NODE, "neurondevice3")].efa_address == "0000:a3:00.0"
    assert out[(NODE, "neurondevice4")].efa_address == ""
    assert efa_addresses(out) == {3: "0000:a3:00.0"}  # a device without deviceId cannot be joined
