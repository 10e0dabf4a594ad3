"""AWS compatibility on the real reference reports: metric names, label names, value conversions."""

from __future__ import annotations

import orjson

from tests.exporters.prometheus.prom_helpers import feed, label_names, one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import CWAGENT_REPORT, WANDB_REPORTS

INSTANCE = {"instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id"}


def _cwagent() -> dict:
    return orjson.loads(CWAGENT_REPORT.read_bytes())


def _wandb() -> list[dict]:
    return [orjson.loads(line) for line in WANDB_REPORTS.read_bytes().splitlines() if line.strip()]


def test_cwagent_report_has_awss_metrics_with_awss_labels() -> None:
    report = _cwagent()
    series = parse(scrape(feed([report])))
    rt = report["neuron_runtime_data"][0]["report"]
    core_util = rt["neuroncore_counters"]["neuroncores_in_use"]["6"]["neuroncore_utilization"]
    assert one(series, "neuroncore_utilization_ratio", runtime_tag="367", neuroncore="6") == core_util / 100.0
    assert label_names(series, "neuroncore_utilization_ratio") == {
        frozenset(INSTANCE | {"runtime_tag", "neuroncore", "neuron_device_index"})
    }
    # trn1n: 2 cores per device
    assert select(series, "neuroncore_utilization_ratio", runtime_tag="367", neuroncore="7", neuron_device_index="3")
    mem = rt["memory_used"]["neuron_runtime_used_bytes"]
    assert one(series, "neuron_runtime_memory_used_bytes", runtime_tag="367", memory_location="host") == mem["host"]
    assert (
        one(series, "neuron_runtime_memory_used_bytes", runtime_tag="367", memory_location="neuron_device")
        == mem["neuron_device"]
    )
    per_core = mem["usage_breakdown"]["neuroncore_memory_usage"]["3"]
    for kind in ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors"):
        got = one(series, f"neuroncore_memory_usage_{kind}", runtime_tag="367", neuroncore="3", memory_location="None")
        assert got == per_core[kind]
    stats = rt["execution_stats"]
    for kind, count in stats["execution_summary"].items():
        assert one(series, "execution_status_total", runtime_tag="367", status_type=kind) == count
    for kind, count in stats["error_summary"].items():
        assert one(series, "execution_errors_total", runtime_tag="367", error_type=kind) == count
    # the runtime vCPU group carries an error in this report: skipped, as AWS does, and reported
    assert not select(series, "neuron_runtime_vcpu_usage_ratio")
    assert one(series, "neuron_exporter_group_success", group="neuron_runtime_vcpu_usage") == 0.0
    assert one(series, "neuron_exporter_group_success", group="memory_used") == 1.0
    # latency is null: no series
    assert not select(series, "execution_latency_seconds")


def test_cwagent_system_and_info_metrics() -> None:
    report = _cwagent()
    series = parse(scrape(feed([report])))
    sysd = report["system_data"]
    avg = sysd["vcpu_usage"]["average_usage"]
    assert one(series, "system_vcpu_count") == len(sysd["vcpu_usage"]["usage_data"])
    user = min(avg["user"] + avg["nice"], 100.0) / 100.0
    system = min(avg["system"] + avg["io_wait"] + avg["irq"] + avg["soft_irq"], 100.0) / 100.0
    assert one(series, "system_vcpu_usage_ratio", usage_type="user") == user
    assert one(series, "system_vcpu_usage_ratio", usage_type="system") == system
    for key in ("memory_total_bytes", "memory_used_bytes", "swap_total_bytes", "swap_used_bytes"):
        assert one(series, f"system_{key}") == sysd["memory_info"][key]
    for dev in sysd["neuron_hw_counters"]["neuron_devices"]:
        idx = str(dev["neuron_device_index"])
        for event in ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"):
            got = one(series, "hardware_ecc_events_total", neuron_device_index=idx, event_type=event)
            assert got == dev[event]
    info = report["instance_info"]
    inst = one(
        series,
        "instance_info",
        instance_id=info["instance_id"],
        availability_zone=info["instance_availability_zone"],
        region=info["instance_region"],
        instance_name=info["instance_name"],
    )
    assert inst == 1.0
    hw = one(series, "neuron_hardware_info", neuron_device_count="16", neuroncore_per_device_count="2")
    assert hw == 1.0
    assert label_names(series, "system_vcpu_count") == {frozenset(INSTANCE)}


def test_no_created_series_and_aws_names_only_suffixes() -> None:
    text = scrape(feed([_cwagent()]))
    assert "_created" not in text
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
    for name, kind in types.items():
        assert name.endswith("_total") == (kind == "counter"), name


def test_wandb_reports_counters_and_exited_runtime() -> None:
    reports = _wandb()
    state = feed(reports[:1])
    first = parse(scrape(state))
    assert select(first, "neuroncore_utilization_ratio", runtime_tag="1337")
    for r in reports[1:]:
        assert state.apply(r)
    series = parse(scrape(state))
    # runtime 1337 is gone from reports 2 and 3: every one of its series vanished
    assert not [k for k in series if ("runtime_tag", "1337") in k[1]]
    completed = sum(
        r["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"] for r in reports[1:]
    )
    assert one(series, "execution_status_total", runtime_tag="16851", status_type="completed") == completed
    generic = sum(
        r["neuron_runtime_data"][0]["report"]["execution_stats"]["error_summary"]["generic"] for r in reports[1:]
    )
    assert one(series, "execution_errors_total", runtime_tag="16851", error_type="generic") == generic
    last = reports[-1]["neuron_runtime_data"][0]["report"]["execution_stats"]["latency_stats"]
    assert (
        one(series, "execution_latency_seconds", runtime_tag="16851", percentile="p99")
        == (last["total_latency"]["p99"])
    )
    assert (
        one(series, "execution_device_latency_seconds", runtime_tag="16851", percentile="p50")
        == (last["device_latency"]["p50"])
    )
    vcpu = reports[-1]["neuron_runtime_data"][0]["report"]["neuron_runtime_vcpu_usage"]["vcpu_usage"]
    assert one(series, "neuron_runtime_vcpu_usage_ratio", runtime_tag="16851", usage_type="user") == (
        vcpu["user"] / 100.0
    )
    assert one(series, "neuron_runtime_loaded_models", runtime_tag="16851") == 2


def test_repeated_aws_report_without_fresh_key_counts_once() -> None:
    """AWS reports carry no "fresh": a group repeating its measured period is carried over, not new."""
    report = _wandb()[1]
    state = feed([report, report, report])
    series = parse(scrape(state))
    completed = report["neuron_runtime_data"][0]["report"]["execution_stats"]["execution_summary"]["completed"]
    assert one(series, "execution_status_total", runtime_tag="16851", status_type="completed") == completed
