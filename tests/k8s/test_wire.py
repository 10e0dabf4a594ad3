"""The hand-written pod-resources decoder against protobuf's own encoder (podresources.proto via protoc)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.k8s.podresources import (
    ClaimResource,
    ContainerDevices,
    ContainerResources,
    DynamicResource,
    PodResources,
    decode_allocatable_response,
    decode_list_response,
)
from neuron_monitor.k8s.wire import WireError, iter_fields

from .podresources_server import compiled

names = st.text(min_size=0, max_size=20)
device_lists = st.lists(
    st.tuples(
        st.sampled_from(["aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "cpu"]), st.lists(names, max_size=5)
    ),
    max_size=3,
)
claim_lists = st.lists(
    st.tuples(
        names,
        names,
        st.lists(st.tuples(st.sampled_from(["neuron.aws.com", "gpu.nvidia.com"]), names, names), max_size=3),
    ),
    max_size=2,
)
pods_strategy = st.lists(
    st.tuples(names, names, st.lists(st.tuples(names, device_lists, claim_lists), max_size=3)),
    max_size=4,
)


def _encode(pods: list) -> bytes:
    pb2, _ = compiled()
    msg = pb2.ListPodResourcesResponse(
        pod_resources=[
            pb2.PodResources(
                name=name,
                namespace=ns,
                containers=[
                    pb2.ContainerResources(
                        name=cname,
                        devices=[
                            pb2.ContainerDevices(
                                resource_name=res,
                                device_ids=ids,
                                topology=pb2.TopologyInfo(nodes=[pb2.NUMANode(ID=1)]),
                            )
                            for res, ids in devs
                        ],
                        cpu_ids=[1, 2, 300000],
                        memory=[pb2.ContainerMemory(memory_type="hugepages-2Mi", size=2 << 20)],
                        dynamic_resources=[
                            pb2.DynamicResource(
                                claim_name=cn,
                                claim_namespace=cns,
                                claim_resources=[
                                    pb2.ClaimResource(
                                        cdi_devices=[pb2.CDIDevice(name="k8s.neuron.aws.com/neuron=x")],
                                        driver_name=drv,
                                        pool_name=pool,
                                        device_name=dev,
                                        share_id="s-1",
                                    )
                                    for drv, pool, dev in res
                                ],
                            )
                            for cn, cns, res in claims
                        ],
                    )
                    for cname, devs, claims in containers
                ],
            )
            for name, ns, containers in pods
        ]
    )
    return msg.SerializeToString()


@settings(max_examples=60, deadline=None)
@given(pods_strategy)
def test_list_response_decodes_like_protobuf(pods: list) -> None:
    decoded = decode_list_response(_encode(pods))
    expected = [
        PodResources(
            name,
            ns,
            tuple(
                ContainerResources(
                    cname,
                    tuple(ContainerDevices(res, tuple(ids)) for res, ids in devs),
                    tuple(DynamicResource(cn, cns, tuple(ClaimResource(*r) for r in res)) for cn, cns, res in claims),
                )
                for cname, devs, claims in containers
            ),
        )
        for name, ns, containers in pods
    ]
    assert decoded == expected


def test_allocatable_response_skips_cpu_ids_and_memory() -> None:
    pb2, _ = compiled()
    raw = pb2.AllocatableResourcesResponse(
        devices=[pb2.ContainerDevices(resource_name="aws.amazon.com/neuroncore", device_ids=["0", "1"])],
        cpu_ids=list(range(64)),
        memory=[pb2.ContainerMemory(memory_type="memory", size=1 << 40)],
    ).SerializeToString()
    assert decode_allocatable_response(raw) == [ContainerDevices("aws.amazon.com/neuroncore", ("0", "1"))]


@pytest.mark.parametrize(
    "raw",
    [
        b"\x0a\x05abc",  # length runs past the end
        b"\x0a",  # missing length
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # overlong varint
        b"\x0b",  # group wire type
        b"\x00\x01",  # field number 0
    ],
)
def test_malformed_bytes_raise_wire_error(raw: bytes) -> None:
    with pytest.raises(WireError):
        list(iter_fields(raw))


def test_wrong_wire_type_for_a_message_field_is_an_error() -> None:
    with pytest.raises(WireError):
        decode_list_response(b"\x08\x01")  # field 1 as a varint where a PodResources message belongs


def test_a_repeated_singular_string_keeps_the_last_and_checks_every_one() -> None:
    # ContainerDevices with resource_name (field 1) twice and one device id (field 2)
    raw = b"\x0a\x01a" + b"\x12\x01x" + b"\x0a\x01b"
    assert decode_allocatable_response(b"\x0a" + bytes([len(raw)]) + raw) == [ContainerDevices("b", ("x",))]
    bad = b"\x08\x01" + b"\x0a\x01b"  # the first resource_name a varint
    with pytest.raises(WireError):
        decode_allocatable_response(b"\x0a" + bytes([len(bad)]) + bad)
