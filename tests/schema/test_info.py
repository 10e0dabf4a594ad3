"""The typed info objects (``instance_info``, ``neuron_hardware_info``, ``neuron_k8s_info``): real reports read
without a problem, wrong types are left out and recorded (never raised), each object is read once, and consumers
apply their policy (the Prometheus exporter keeps serving the previous report)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from neuron_monitor.schema.info import HardwareInfo, InstanceInfo, K8sEntry, K8sInfo
from neuron_monitor.schema.read import read_report
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.schema.conftest import aws_reports

K8S: dict[str, Any] = {
    "period": 5.0,
    "neuroncores_k8s_info": {
        "0": {"pod_name": "train-0", "namespace": "ml", "container_name": ["main", "side"]},
        "1": {
            "pod_name": "infer-1",
            "namespace": "ml",
            "container_name": "srv",
            "pod_uid": "u-1",
            "claim_name": "c1",
            "claim_namespace": "claims",
        },
    },
    "neurondevices_k8s_info": {"0": {"pod_name": "train-0", "namespace": "ml", "container_name": []}},
    "error": "",
}


def _report(**objects: Any) -> dict[str, Any]:
    return {"neuron_runtime_data": [], "system_data": {}, **objects}


def test_real_aws_reports_read_their_info_objects_without_a_problem() -> None:
    for raw in aws_reports():
        report = read_report(raw)
        for info in (report.instance_info, report.hardware_info, report.k8s_info):
            assert info is None or not info.problems, info.problems.first()
        if raw.get("instance_info"):
            assert report.instance_info is not None
            assert report.instance_info.instance_type == raw["instance_info"]["instance_type"]
        if raw.get("neuron_hardware_info"):
            hw = report.hardware_info
            assert hw is not None
            assert hw.neuron_device_count == raw["neuron_hardware_info"]["neuron_device_count"]
            assert type(hw.neuron_device_count) is type(raw["neuron_hardware_info"]["neuron_device_count"])


def test_fields_are_typed_and_the_dra_keys_are_read() -> None:
    report = read_report(
        _report(
            instance_info={"instance_id": "i-1", "instance_type": "trn2.48xlarge", "ultraserver_id": "us-1"},
            neuron_hardware_info={"neuron_device_count": 16, "neuron_device_type": "trainium2", "error": ""},
            neuron_k8s_info=K8S,
        )
    )
    assert report.instance_info == InstanceInfo(instance_id="i-1", instance_type="trn2.48xlarge", ultraserver_id="us-1")
    assert report.hardware_info == HardwareInfo(neuron_device_count=16, neuron_device_type="trainium2")
    assert report.k8s_info == K8sInfo(
        period=5.0,
        cores={
            "0": K8sEntry("train-0", "ml", ("main", "side")),
            "1": K8sEntry("infer-1", "ml", ("srv",), pod_uid="u-1", claim_name="c1", claim_namespace="claims"),
        },
        devices={"0": K8sEntry("train-0", "ml", ())},
    )


def test_absent_objects_are_none_and_each_object_is_read_once() -> None:
    report = read_report(_report(instance_info={"instance_id": "i-1"}))
    assert report.hardware_info is None and report.k8s_info is None
    assert report.instance_info is report.instance_info  # cached


@pytest.mark.parametrize(
    ("key", "obj", "path"),
    [
        ("instance_info", {"instance_id": {"x": 1}, "instance_type": "t"}, "instance_info.instance_id"),
        ("neuron_hardware_info", {"neuron_device_count": "16"}, "neuron_hardware_info.neuron_device_count"),
        ("neuron_hardware_info", {"neuron_device_type": ["a"]}, "neuron_hardware_info.neuron_device_type"),
        ("neuron_k8s_info", {"neuroncores_k8s_info": []}, "neuron_k8s_info.neuroncores_k8s_info"),
        ("neuron_k8s_info", {"neuroncores_k8s_info": {"0": "pod"}}, "neuron_k8s_info.neuroncores_k8s_info.0"),
        (
            "neuron_k8s_info",
            {"neuroncores_k8s_info": {"0": {"pod_name": "p", "container_name": ["a", {}]}}},
            "neuron_k8s_info.neuroncores_k8s_info.0.container_name.1",
        ),
        (
            "neuron_k8s_info",
            {"neuroncores_k8s_info": {"0": {"pod_name": "p", "claim_name": 7.5, "pod_uid": []}}},
            "neuron_k8s_info.neuroncores_k8s_info.0.pod_uid",
        ),
    ],
)
def test_a_wrong_type_is_left_out_and_recorded_never_raised(key: str, obj: dict[str, Any], path: str) -> None:
    report = read_report(_report(**{key: obj}))
    info = {
        "instance_info": report.instance_info,
        "neuron_hardware_info": report.hardware_info,
        "neuron_k8s_info": report.k8s_info,
    }[key]
    assert info is not None
    assert [p.split(":")[0] for p in info.problems.values] == [path]
    assert not info.problems.counts
    if key == "instance_info":
        assert report.instance_info == InstanceInfo(instance_type="t")
    if key == "neuron_k8s_info" and "container_name" in path:
        assert report.k8s_info is not None and report.k8s_info.cores["0"].containers == ("a",)
    if path.endswith("pod_uid"):
        entry = report.k8s_info.cores["0"] if report.k8s_info else None
        assert entry == K8sEntry(pod_name="p", claim_name="7.5")


def _small() -> dict[str, Any]:
    report = trn2_report([runtime(1, "a", [0, 1], completed=5)], vcpus=4, devices=2)
    report["neuron_k8s_info"] = copy.deepcopy(K8S)
    return report


@pytest.mark.parametrize(
    ("key", "field", "value"),
    [
        ("instance_info", "instance_type", {"x": 1}),
        ("neuron_hardware_info", "neuroncore_per_device_count", "8"),
        ("neuron_k8s_info", "neuroncores_k8s_info", ["0"]),
    ],
)
def test_prometheus_keeps_serving_the_previous_report_on_a_wrong_info_value(key: str, field: str, value: Any) -> None:
    state = feed([_small()])
    before = parse(scrape(state))
    bad = _small()
    bad[key][field] = value
    state.apply(bad)
    after = parse(scrape(state))
    assert one(after, "neuron_exporter_bad_lines_total", reason="malformed_report") == 1
    keep = {k: v for k, v in before.items() if not k[0].startswith(("neuron_exporter_bad", "neuron_exporter_reports"))}
    assert {k: v for k, v in after.items() if k in keep} == keep
