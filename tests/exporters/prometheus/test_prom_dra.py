"""Pod labels of cores held through DRA claims: dra_claim_name/dra_claim_namespace beside AWS's pod labels, devices
no pod holds keeping every series (dcgm-exporter #569), and the label modes."""

from __future__ import annotations

from typing import Any

from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from tests.exporters.prometheus.prom_helpers import feed, label_names, one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

CLAIMED = {
    "pod_name": "pod0",
    "namespace": "ml",
    "container_name": ["ctr0"],
    "pod_uid": "1f0e-pod0",
    "claim_name": "pod0-neurons-zdk76",
    "claim_namespace": "ml",
}
PLUGIN = {"pod_name": "legacy", "namespace": "old", "container_name": ["c"]}


def k8s_info() -> dict[str, Any]:
    # device 2 (cores 8-11) through a claim, device 0 (cores 0-3) through the device plugin (a node in migration)
    return {
        "period": 15.0,
        "neuroncores_k8s_info": {
            **{str(c): PLUGIN for c in range(0, 4)},
            **{str(c): CLAIMED for c in range(8, 12)},
        },
        "neurondevices_k8s_info": {"0": PLUGIN, "2": CLAIMED},
        "error": "",
    }


def report(k8s: dict[str, Any] | None) -> dict[str, Any]:
    # runtime c works on device 5, which no pod holds
    return trn2_report([runtime(1, "a", [8, 9]), runtime(2, "b", [0]), runtime(3, "c", [20])], k8s=k8s)


def test_claimed_cores_carry_the_claim_and_aws_pod_labels() -> None:
    series = parse(scrape(feed([report(k8s_info())])))
    assert one(
        series,
        "neuroncore_utilization_ratio",
        neuroncore="8",
        pod_name="pod0",
        namespace="ml",
        container_name="ctr0",
        dra_claim_name="pod0-neurons-zdk76",
        dra_claim_namespace="ml",
    )
    assert select(
        series, "execution_status_total", runtime_tag="a", pod_name="pod0", dra_claim_name="pod0-neurons-zdk76"
    )
    # the device-plugin pod: same label names, empty claim labels (absent to PromQL)
    assert select(series, "neuroncore_utilization_ratio", neuroncore="0", pod_name="legacy", dra_claim_name="")
    names = label_names(series, "neuroncore_utilization_ratio")
    assert len(names) == 1 and {"pod_name", "dra_claim_name", "dra_claim_namespace"} <= next(iter(names))


def test_devices_no_pod_holds_keep_every_series() -> None:
    series = parse(scrape(feed([report(k8s_info())])))
    without = parse(scrape(feed([report(None)])))
    for name in ("neuroncore_utilization_ratio", "neuron_runtime_memory_used_bytes", "execution_status_total"):
        assert select(series, name, runtime_tag="c", pod_name="", dra_claim_name="")
        assert len(select(series, name)) == len(select(without, name))  # attribution adds labels, drops nothing
    assert one(series, "neuroncore_utilization_ratio", neuroncore="20", pod_name="") is not None


def test_no_claim_labels_without_dra_entries() -> None:
    k8s = {"neuroncores_k8s_info": {"0": PLUGIN}, "neurondevices_k8s_info": {}, "error": ""}
    series = parse(scrape(feed([report(k8s)])))
    assert "dra_claim_name" not in next(iter(label_names(series, "neuroncore_utilization_ratio")))


def test_label_modes_on_and_off() -> None:
    plugin_only = {"neuroncores_k8s_info": {"0": PLUGIN}, "neurondevices_k8s_info": {}, "error": ""}
    on = parse(scrape(feed([report(plugin_only)], ShapeOptions(dra_claim_labels="on"))))
    assert "dra_claim_name" in next(iter(label_names(on, "neuroncore_utilization_ratio")))
    off = parse(scrape(feed([report(k8s_info())], ShapeOptions(dra_claim_labels="off"))))
    names = next(iter(label_names(off, "neuroncore_utilization_ratio")))
    assert "dra_claim_name" not in names and "pod_name" in names
    assert one(off, "neuroncore_utilization_ratio", neuroncore="8", pod_name="pod0") is not None


def test_runtime_across_a_claimed_and_a_plugin_device_joins_without_empty_parts() -> None:
    series = parse(scrape(feed([trn2_report([runtime(1, "x", [0, 8])], k8s=k8s_info())])))
    assert select(
        series,
        "neuron_runtime_loaded_models",
        runtime_tag="x",
        pod_name="legacy,pod0",
        dra_claim_name="pod0-neurons-zdk76",
        dra_claim_namespace="ml",
    )


def test_real_exporter_process_serves_the_claim_labels() -> None:
    from tests.exporters.prometheus.prom_process import ExporterProcess

    exporter = ExporterProcess()
    try:
        exporter.send(report(k8s_info()))
        body = exporter.wait_for("/metrics", lambda s, b: "dra_claim_name=" in b, timeout=30)
    finally:
        exporter.stop()
    series = parse(body)
    assert one(series, "neuroncore_utilization_ratio", neuroncore="9", dra_claim_name="pod0-neurons-zdk76") is not None
    assert select(series, "neuroncore_utilization_ratio", neuroncore="20", pod_name="", dra_claim_name="")
