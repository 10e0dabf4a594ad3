"""Report -> datums on real reports and reports built from them: names, units, dimensions, fresh/error rules."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from neuron_monitor.exporters.cloudwatch.datum import UNITS, Datum
from neuron_monitor.exporters.cloudwatch.dimensions import DimensionScheme
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper, camel


def by_name(datums: list[Datum]) -> dict[str, list[Datum]]:
    out: dict[str, list[Datum]] = {}
    for d in datums:
        out.setdefault(d.name, []).append(d)
    return out


def dims(d: Datum) -> dict[str, str]:
    return dict(d.dims)


def test_camel() -> None:
    assert camel("completed_with_err") == "CompletedWithErr"
    assert camel("p100") == "P100"
    assert camel("nc_v3.0") == "NcV30"


def test_trn1_report_every_group_with_units_and_dimensions(trn1_report: dict[str, Any]) -> None:
    datums = ReportMapper().map(trn1_report, now=1.0)
    names = by_name(datums)
    assert all(d.unit in UNITS for d in datums)
    assert all(d.timestamp == 1.0 for d in datums)  # the reference report has no report_time: wall clock
    # 2 runtimes x 32 cores, each core on device core // 2 (neuroncore_per_device_count = 2)
    util = names["NeuronCoreUtilization"]
    assert len(util) == 64 and {d.unit for d in util} == {"Percent"}
    nc6 = [d for d in util if dims(d)["NeuronCore"] == "6" and dims(d)["RuntimeTag"] == "367"]
    assert len(nc6) == 1 and nc6[0].value == 41.4
    assert dims(nc6[0]) == {
        "InstanceId": "i-09db9b55e0095612f",
        "InstanceType": "trn1n.32xlarge",
        "RuntimeTag": "367",
        "NeuronDevice": "3",
        "NeuronCore": "6",
    }
    # per-core memory: five categories plus total, in bytes
    model_code = names["NeuronCoreMemoryUsageModelCode"]
    assert len(model_code) == 64 and {d.value for d in model_code} == {100752896.0}
    assert {d.value for d in names["NeuronCoreMemoryUsageTotal"]} == {100752896.0 + 9912852.0}
    assert {d.unit for d in names["NeuronCoreMemoryUsageTotal"]} == {"Bytes"}
    assert names["RuntimeDeviceMemoryUsed"][0].value == 3541303936
    # execution counters are Counts; the latency percentiles are null (idle) and so not sent
    assert [d.value for d in names["ExecutionErrorsGeneric"]] == [2.0, 2.0]
    assert names["ExecutionCompleted"][0].unit == "Count"
    per_second = names["ExecutionCompletedPerSecond"][0]
    assert per_second.unit == "Count/Second" and abs(per_second.value - 2 / 4.999666547) < 1e-9
    assert not any(n.startswith("ExecutionLatency") for n in names)
    # neuron_runtime_vcpu_usage carries an error in this report: not sent
    assert not any(n.startswith("RuntimeVCpuUsage") for n in names)
    # system groups: host dims only
    assert dims(names["HostMemoryTotal"][0]) == {"InstanceId": "i-09db9b55e0095612f", "InstanceType": "trn1n.32xlarge"}
    assert names["HostMemoryTotal"][0].value == 532523487232
    assert names["HostVCpuUsageUser"][0].value == 19.66
    assert abs(names["HostVCpuUtilization"][0].value - (100 - 78.67)) < 1e-9
    assert names["HostVCpuCount"][0].value == 128
    assert names["HostContextSwitches"][0].value == 171386
    ecc = {dims(d)["NeuronDevice"]: d.value for d in names["NeuronDeviceMemEccCorrected"]}
    assert len(ecc) == 16 and ecc["0"] == 1
    totals = {dims(d)["NeuronDevice"]: d.value for d in names["NeuronDeviceHwEccEventsTotal"]}
    device0 = trn1_report["system_data"]["neuron_hw_counters"]["neuron_devices"][0]
    assert totals["0"] == sum(v for k, v in device0.items() if k != "neuron_device_index")
    # no series twice in one report
    keys = Counter((d.name, d.dims) for d in datums)
    assert max(keys.values()) == 1


def test_latency_one_metric_per_percentile(wandb_reports: list[dict[str, Any]]) -> None:
    report = wandb_reports[0]
    names = by_name(ReportMapper().map(report, now=5.0))
    total = report["neuron_runtime_data"][0]["report"]["execution_stats"]["latency_stats"]["total_latency"]
    for p, v in total.items():
        (d,) = names["ExecutionLatency" + p.upper()]
        assert d.value == v and d.unit == "Seconds"
        assert dims(d)["RuntimeTag"] == "1337"
    assert {f"DeviceLatency{p.upper()}" for p in total} <= set(names)


def test_group_sent_only_when_fresh_and_without_error(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    report["report_time"] = 1234.5
    for entry in report["neuron_runtime_data"]:
        entry["report"]["execution_stats"]["fresh"] = False  # carried over: counted in an earlier report
        entry["report"]["memory_used"]["fresh"] = True
    report["system_data"]["neuron_hw_counters"]["fresh"] = False
    report["system_data"]["memory_info"]["error"] = "cannot read /proc/meminfo"
    names = by_name(ReportMapper().map(report))
    assert not any(n.startswith("Execution") for n in names)
    assert not any(n.startswith("NeuronDevice") for n in names)
    assert not any(n.startswith("HostMemory") or n.startswith("HostSwap") for n in names)
    assert "RuntimeHostMemoryUsed" in names and "HostVCpuUsageUser" in names
    assert {d.timestamp for ds in names.values() for d in ds} == {1234.5}


def test_runtime_with_error_is_skipped(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    report["neuron_runtime_data"][0]["error"] = "runtime went away"
    tags = {dims(d).get("RuntimeTag") for d in ReportMapper().map(report)}
    assert tags == {None, "123"}


def test_same_tag_twice_sums_additive_and_keeps_latency_samples(wandb_reports: list[dict[str, Any]]) -> None:
    report = copy.deepcopy(wandb_reports[0])
    report["neuron_runtime_data"].append(copy.deepcopy(report["neuron_runtime_data"][0]))
    names = by_name(ReportMapper().map(report, now=1.0))
    (completed,) = names["ExecutionCompleted"]
    assert completed.value == 2 * 260
    assert len(names["ExecutionLatencyP50"]) == 2  # two processes' p50: two samples, never summed


def test_bad_values_are_skipped_not_fatal(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    rt = report["neuron_runtime_data"][0]["report"]
    rt["neuroncore_counters"]["neuroncores_in_use"]["0"]["neuroncore_utilization"] = "n/a"
    rt["neuroncore_counters"]["neuroncores_in_use"]["1"] = None
    rt["memory_used"]["neuron_runtime_used_bytes"] = [1, 2]
    report["system_data"]["neuron_hw_counters"]["neuron_devices"].append({"neuron_device_index": "x"})
    report["neuron_hardware_info"] = None
    report["instance_info"] = {"instance_id": "", "instance_type": "trn1.32xlarge"}
    datums = ReportMapper().map(report, now=1.0)
    cores = {(dims(d)["RuntimeTag"], dims(d)["NeuronCore"]) for d in datums if d.name == "NeuronCoreUtilization"}
    assert ("367", "0") not in cores and ("367", "1") not in cores and ("367", "2") in cores
    # no neuroncore_per_device_count: no NeuronDevice dimension
    assert not any("NeuronDevice" in dims(d) for d in datums if d.name == "NeuronCoreUtilization")
    assert all("InstanceId" not in dims(d) for d in datums)  # empty value: dimension left out
    assert {dims(d)["RuntimeTag"] for d in datums if d.name == "RuntimeHostMemoryUsed"} == {"123"}


def test_trn2_v3d_and_flops() -> None:
    report = {
        "neuron_runtime_data": [
            {
                "pid": 10,
                "neuron_runtime_tag": "train",
                "error": "",
                "report": {
                    "neuroncore_counters": {
                        "period": 1.0,
                        "neuroncores_in_use": {
                            "5": {
                                "neuroncore_utilization": 42.0,
                                "flops": 1.5e12,
                                "effective_flops": 1.2e12,
                                "v3d": {"nc_v3.0": {"neuroncore_utilization": 21.0}},
                            }
                        },
                        "error": "",
                    }
                },
            }
        ],
        "neuron_hardware_info": {"neuroncore_per_device_count": 4},
        "instance_info": {"instance_id": "i-1", "instance_type": "trn2.48xlarge"},
        "report_time": 100.0,
    }
    names = by_name(ReportMapper().map(report))
    assert names["NeuronCoreFlops"][0].unit == "Count/Second" and names["NeuronCoreFlops"][0].value == 1.5e12
    assert names["NeuronCoreEffectiveFlops"][0].value == 1.2e12
    (phys,) = names["PhysicalNeuronCoreUtilization"]
    assert dims(phys)["PhysicalNeuronCore"] == "nc_v3.0" and dims(phys)["NeuronDevice"] == "1"


def test_container_insights_preset(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    report["neuron_k8s_info"] = {
        "period": 15.0,
        "neuroncores_k8s_info": {"6": {"pod_name": "p0", "namespace": "n0", "container_name": ["c0"]}},
        "neurondevices_k8s_info": {"3": {"pod_name": "p0", "namespace": "n0", "container_name": ["c0"]}},
        "error": "",
    }
    scheme = DimensionScheme("container-insights", cluster_name="prod", node_name="ip-10-0-0-1")
    names = by_name(ReportMapper(scheme).map(report, now=1.0))
    util = names["NeuronCoreUtilization"]
    assert len(util) == 32  # no RuntimeTag per core: the two runtimes' values on one core are summed
    (nc6,) = [d for d in util if dims(d)["NeuronCore"] == "6"]
    assert nc6.value == 41.4
    assert dims(nc6) == {
        "ClusterName": "prod",
        "InstanceId": "i-09db9b55e0095612f",
        "InstanceType": "trn1n.32xlarge",
        "NodeName": "ip-10-0-0-1",
        "NeuronDevice": "3",
        "NeuronCore": "6",
        "Namespace": "n0",
        "PodName": "p0",
        "ContainerName": "c0",
    }
    (model_code,) = [d for d in names["NeuronCoreMemoryUsageModelCode"] if dims(d)["NeuronCore"] == "0"]
    assert model_code.value == 2 * 100752896
    dev3 = [d for d in names["NeuronDeviceHwEccEventsTotal"] if dims(d)["NeuronDevice"] == "3"]
    assert dims(dev3[0])["PodName"] == "p0"
    assert dims(names["ExecutionCompleted"][0])["RuntimeTag"] in {"367", "123"}


def test_dra_entries_keep_the_container_insights_dimensions(trn1_report: dict[str, Any]) -> None:
    """Entries from a DRA claim carry pod_uid/claim_name/claim_namespace: CloudWatch's dimensions do not change."""
    report = copy.deepcopy(trn1_report)
    claimed = {
        "pod_name": "p0",
        "namespace": "n0",
        "container_name": ["c0"],
        "pod_uid": "uid-p0",
        "claim_name": "p0-neurons-x1",
        "claim_namespace": "n0",
    }
    report["neuron_k8s_info"] = {
        "period": 15.0,
        "neuroncores_k8s_info": {"6": claimed},
        "neurondevices_k8s_info": {"3": claimed},
        "error": "",
    }
    scheme = DimensionScheme("container-insights", cluster_name="prod", node_name="ip-10-0-0-1")
    names = by_name(ReportMapper(scheme).map(report, now=1.0))
    (nc6,) = [d for d in names["NeuronCoreUtilization"] if dims(d)["NeuronCore"] == "6"]
    assert set(dims(nc6)) == {
        "ClusterName",
        "InstanceId",
        "InstanceType",
        "NodeName",
        "NeuronDevice",
        "NeuronCore",
        "Namespace",
        "PodName",
        "ContainerName",
    }
    assert (dims(nc6)["PodName"], dims(nc6)["Namespace"], dims(nc6)["ContainerName"]) == ("p0", "n0", "c0")


def test_per_vcpu_and_high_resolution(trn1_report: dict[str, Any]) -> None:
    plain = ReportMapper().map(trn1_report, now=1.0)
    wide = ReportMapper(options=MapOptions(high_resolution=True, per_vcpu=True)).map(trn1_report, now=1.0)
    per_cpu = [d for d in wide if "VCpu" in dims(d)]
    assert len(per_cpu) == 128 * 8  # seven usage types + utilization per vCPU
    assert len(wide) == len(plain) + len(per_cpu)
    assert {d.resolution for d in wide} == {1} and {d.resolution for d in plain} == {60}


def test_partial_ecc_error_still_sends_the_counters_other_groups_all_or_nothing(trn1_report: dict[str, Any]) -> None:
    """neuron_hw_counters may name unexposed ECC files in ``error`` (older drivers): the counters still go out."""
    report = copy.deepcopy(trn1_report)
    report["system_data"]["neuron_hw_counters"]["error"] = "mem_ecc_corrected not exposed by the driver"
    report["system_data"]["memory_info"]["error"] = "open /proc/meminfo: permission denied"
    names = by_name(ReportMapper().map(report, now=1.0))
    assert any(n.startswith("NeuronDeviceHwEcc") for n in names)
    assert not any(n.startswith("HostMemory") or n.startswith("SystemMemory") for n in names)


def test_efa_counters_use_the_cloudwatch_agents_names_and_dimensions(trn1_report: dict[str, Any]) -> None:
    report = copy.deepcopy(trn1_report)
    report["system_data"]["efa_counters"] = {
        "period": 5.0,
        "error": "",
        "efa_ports": [
            {"efa_device": "rdmap16s27", "port": "1", "pci_address": "0000:10:1b.0", "neuron_device_indexes": [0, 1],
             "state": "ACTIVE", "link_up": True, "rate_gbps": 100.0,
             "counters": {"tx_bytes": 4096, "rx_drops": 2, "retrans_pkts": 7, "some_new_counter": 1}},
        ],
    }  # fmt: skip
    names = by_name(ReportMapper().map(report))
    (tx,) = names["efa_tx_bytes"]
    assert (tx.value, tx.unit) == (4096, "Bytes")
    assert dims(tx)["device"] == "rdmap16s27" and dims(tx)["port"] == "1" and "InstanceId" in dims(tx)
    assert names["efa_rx_dropped"][0].value == 2  # the agent's name for the kernel's rx_drops
    assert names["efa_retrans_pkts"][0].unit == "Count"
    assert names["efa_link_up"][0].value == 1.0
    assert not any("some_new_counter" in n for n in names)  # a counter no spec names is not sent


def test_a_count_past_what_any_source_counts_in_a_period_is_not_summed(trn1_report: dict[str, Any]) -> None:
    """A producer's per-period count of 1.8e19 (a counter read across a reset as a wrap near 2^64) or a negative
    one is left out (the bound the Prometheus exporter applies too), counted and logged; the rest is sent."""
    report = copy.deepcopy(trn1_report)
    devices = report["system_data"]["neuron_hw_counters"]["neuron_devices"]
    devices[0]["mem_ecc_uncorrected"] = 18446744073709551613
    devices[1]["sram_ecc_uncorrected"] = -3
    mapper = ReportMapper()
    names = by_name(mapper.map(report, now=1.0))
    unc = {dims(d)["NeuronDevice"]: d.value for d in names["NeuronDeviceMemEccUncorrected"]}
    assert "0" not in unc and len(unc) == 15
    sram = {dims(d)["NeuronDevice"]: d.value for d in names["NeuronDeviceSramEccUncorrected"]}
    assert "1" not in sram
    assert mapper.absurd >= 2
    assert all(d.value < 1e12 for ds in names.values() for d in ds if d.unit == "Count")
