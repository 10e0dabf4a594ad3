"""Counters counted once whatever the group periods, exited runtimes, shared tags, pods, instance-label mode."""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from tests.exporters.prometheus.prom_helpers import feed, label_names, one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import runtime, trn2_report


def _completed(series, tag: str) -> float:  # type: ignore[no-untyped-def]
    return one(series, "execution_status_total", runtime_tag=tag, status_type="completed")


def test_counts_added_only_when_fresh() -> None:
    """Execution stats with a 3 s period inside 1 s reports: carried-over copies (fresh=false) add nothing."""
    reports = []
    expected = 0
    for i in range(9):
        fresh = i % 3 == 0
        completed = 7 + i  # a carried-over group repeats its data; the value must not be re-added
        if fresh:
            expected += completed
        reports.append(trn2_report([runtime(100, "a", [0, 1], completed=completed, fresh=fresh)], ecc=2))
    series = parse(scrape(feed(reports)))
    assert _completed(series, "a") == expected
    # ECC groups were fresh every time: 9 reports x 2 per device
    assert one(series, "hardware_ecc_events_total", neuron_device_index="5", event_type="mem_ecc_corrected") == 18
    # system CPU seconds: avg(user)=20 % of 192 vCPUs over 9 periods of 1 s
    assert abs(one(series, "system_cpu_seconds_total", mode="user") - 0.20 * 192 * 9) < 1e-6
    assert one(series, "system_context_switches_total") == 9000


def test_flop_counters_integrate_rate_over_period() -> None:
    reports = [trn2_report([runtime(100, "a", [0], flops=2e12, period=0.5)]) for _ in range(4)]
    series = parse(scrape(feed(reports)))
    assert one(series, "neuroncore_floating_point_operations_total", neuroncore="0") == 4 * 2e12 * 0.5
    assert one(series, "neuroncore_effective_floating_point_operations_total", neuroncore="0") == 4 * 1e12 * 0.5


def test_exited_runtime_series_vanish_at_once_and_restart_from_zero() -> None:
    both = trn2_report([runtime(1, "a", [0, 1], completed=5), runtime(2, "b", [4, 5], completed=3)])
    only_b = trn2_report([runtime(2, "b", [4, 5], completed=3)])
    state = feed([both, both])
    series = parse(scrape(state))
    assert _completed(series, "a") == 10
    state.apply(only_b)
    series = parse(scrape(state))
    assert not [k for k in series if ("runtime_tag", "a") in k[1]]
    assert _completed(series, "b") == 9
    state.apply(both)  # a new process with tag "a": a new counter (a reset for rate())
    assert _completed(parse(scrape(state)), "a") == 5


def test_two_runtimes_sharing_a_tag_never_duplicate_series() -> None:
    shared = trn2_report([runtime(1, "same", [0, 1], completed=5), runtime(2, "same", [2, 3], completed=4)])
    series = parse(scrape(feed([shared, shared])))  # parse() fails on duplicates
    assert _completed(series, "same") == 18  # AWS adds both runtimes' counts to one counter
    assert len(select(series, "neuroncore_utilization_ratio", runtime_tag="same")) == 4
    assert len(select(series, "neuron_runtime_info", runtime_tag="same")) == 2  # pid tells them apart


def test_runtime_and_group_errors() -> None:
    bad_runtime = runtime(1, "a", [0], completed=5)
    bad_runtime["error"] = "cannot read data block"
    failing = runtime(2, "b", [1], completed=5)
    failing["report"]["execution_stats"]["error"] = "stats unavailable"
    state = feed([trn2_report([runtime(1, "a", [0], completed=5), failing])])
    state.apply(trn2_report([bad_runtime, failing]))
    series = parse(scrape(state))
    # runtime "a" has an error: its gauges are skipped, its counter keeps its total
    assert not select(series, "neuroncore_utilization_ratio", runtime_tag="a")
    assert _completed(series, "a") == 5
    assert not select(series, "execution_status_total", runtime_tag="b")
    assert select(series, "neuroncore_utilization_ratio", runtime_tag="b")
    assert one(series, "neuron_exporter_group_success", group="execution_stats") == 0
    assert one(series, "neuron_exporter_group_errors_total", group="execution_stats") == 2
    assert one(series, "neuron_exporter_group_errors_total", group="runtime") == 1


def test_k8s_info_error_reaches_group_success() -> None:
    """neuron_k8s_info is not under system_data, but its error (kubelet unreachable) shows like any group's."""
    good = trn2_report([runtime(1, "a", [0], completed=5)])
    good["neuron_k8s_info"] = {"period": 5.0, "neuroncores_k8s_info": {}, "neurondevices_k8s_info": {}, "error": ""}
    state = feed([good])
    series = parse(scrape(state))
    assert one(series, "neuron_exporter_group_success", group="neuron_k8s_info") == 1
    assert one(series, "neuron_exporter_group_errors_total", group="neuron_k8s_info") == 0
    bad = trn2_report([runtime(1, "a", [0], completed=5)])
    bad["neuron_k8s_info"] = dict(good["neuron_k8s_info"], error="pod-resources socket not found")
    state.apply(bad)
    series = parse(scrape(state))
    assert one(series, "neuron_exporter_group_success", group="neuron_k8s_info") == 0
    assert one(series, "neuron_exporter_group_errors_total", group="neuron_k8s_info") == 1
    assert one(series, "neuron_exporter_group_success", group="execution_stats") == 1  # the rest unaffected


def test_k8s_labels_on_core_and_runtime_series() -> None:
    k8s = {
        "period": 15.0,
        "neuroncores_k8s_info": {
            "0": {"pod_name": "train-0", "namespace": "ml", "container_name": ["main"]},
            "1": {"pod_name": "train-0", "namespace": "ml", "container_name": ["main"]},
            "4": {"pod_name": "infer-1", "namespace": "serve", "container_name": ["api", "sidecar"]},
        },
        "neurondevices_k8s_info": {},
        "error": "",
    }
    report = trn2_report([runtime(1, "a", [0, 1]), runtime(2, "b", [4]), runtime(3, "c", [8])], k8s=k8s)
    series = parse(scrape(feed([report])))
    assert one(
        series,
        "neuroncore_utilization_ratio",
        neuroncore="4",
        pod_name="infer-1",
        namespace="serve",
        container_name="api,sidecar",
    )
    assert one(
        series,
        "execution_status_total",
        runtime_tag="a",
        status_type="completed",
        pod_name="train-0",
        namespace="ml",
        container_name="main",
    )
    # a runtime on cores nobody claims: empty labels (absent in PromQL), same label names
    assert select(series, "neuron_runtime_memory_used_bytes", runtime_tag="c", pod_name="")
    assert len(label_names(series, "neuroncore_utilization_ratio")) == 1
    assert {"pod_name", "namespace", "container_name"} <= next(iter(label_names(series, "neuron_runtime_info")))
    # system series carry no pod labels
    assert "pod_name" not in next(iter(label_names(series, "system_vcpu_count")))


def test_runtime_on_cores_of_two_pods_joins_them() -> None:
    k8s = {
        "neuroncores_k8s_info": {
            "0": {"pod_name": "p1", "namespace": "n", "container_name": ["c1"]},
            "1": {"pod_name": "p2", "namespace": "n", "container_name": ["c2"]},
        },
        "error": "",
    }
    series = parse(scrape(feed([trn2_report([runtime(1, "a", [0, 1])], k8s=k8s)])))
    assert (
        one(
            series,
            "neuron_runtime_loaded_models",
            runtime_tag="a",
            pod_name="p1,p2",
            namespace="n",
            container_name="c1,c2",
        )
        == 2
    )


def test_instance_labels_on_info_only() -> None:
    report = trn2_report()
    series = parse(scrape(feed([report], ShapeOptions(instance_labels_everywhere=False))))
    assert label_names(series, "system_vcpu_count") == {frozenset()}
    assert label_names(series, "neuroncore_utilization_ratio") == {
        frozenset({"runtime_tag", "neuroncore", "neuron_device_index"})
    }
    assert one(series, "instance_info", instance_id="i-0123456789abcdef0", region="us-east-2") == 1
    assert "instance_id" not in next(iter(label_names(series, "neuron_hardware_info")))
    assert one(series, "neuron_hardware_info", neuron_device_type="trainium2", logical_neuroncore_config="2") == 1


def test_trn2_extras_physical_cores_devices_models() -> None:
    series = parse(scrape(feed([trn2_report()], ShapeOptions(series_detail="full"))))  # the per-model series
    # LNC=2: 4 logical cores per device; core 13 is on device 3, physical cores nc_v3.26/27
    assert (
        one(
            series,
            "neuroncore_physical_utilization_ratio",
            neuroncore="13",
            neuron_device_index="3",
            physical_neuroncore="nc_v3.27",
        )
        == 0.51
    )
    assert len(select(series, "neuroncore_utilization_ratio")) == 64
    assert one(series, "neuron_runtime_model_running", runtime_tag="job-00", model_id="10000") == 1
    assert one(series, "neuron_runtime_model_running", runtime_tag="job-00", model_id="10001") == 0
    assert (
        one(
            series,
            "neuron_runtime_model_memory_used_bytes",
            runtime_tag="job-00",
            model_id="10001",
            memory_location="neuron_device",
        )
        == 4096
    )
    assert one(series, "neuron_runtime_host_memory_used_bytes", runtime_tag="job-03", category="dma_buffers") == (
        300_000
    )
    assert one(series, "neuron_exporter_runtimes") == 16


def test_partial_ecc_error_still_counts_the_exposed_counters() -> None:
    """An older driver names the ECC files it lacks in ``error``; the counters it has still count (the group spec's
    ``partial_errors``), and the error shows in the group-error self-metric. Other groups stay all-or-nothing."""
    reports = []
    for _ in range(3):
        r = trn2_report([runtime(100, "a", [0, 1], completed=5)], ecc=2)
        r["system_data"]["neuron_hw_counters"]["error"] = "mem_ecc_corrected not exposed by the driver"
        r["system_data"]["memory_info"]["error"] = "open /proc/meminfo: permission denied"
        reports.append(r)
    series = parse(scrape(feed(reports)))
    assert one(series, "hardware_ecc_events_total", neuron_device_index="5", event_type="mem_ecc_corrected") == 6
    assert one(series, "neuron_exporter_group_errors_total", group="neuron_hw_counters") == 3
    assert not select(series, "system_memory_total_bytes")


def test_pod_labels_kept_while_the_daemon_reports_a_kubelet_outage() -> None:
    """The daemon keeps the last good pod mapping for a while and says why in ``error``: labels stay."""
    k8s = {
        "period": 15.0,
        "neuroncores_k8s_info": {"0": {"pod_name": "train-0", "namespace": "ml", "container_name": ["main"]}},
        "neurondevices_k8s_info": {},
        "error": "pod-resources socket /var/lib/kubelet/pod-resources/kubelet.sock not found",
    }
    series = parse(scrape(feed([trn2_report([runtime(1, "a", [0])], k8s=k8s)])))
    assert one(series, "neuroncore_utilization_ratio", neuroncore="0", pod_name="train-0", namespace="ml")


def test_daemon_health_from_the_report() -> None:
    report = trn2_report([runtime(1, "a", [0])])
    report["neuron_monitor"] = {
        "version": "0.1.0",
        "start_time": 1.7e9,
        "reports": 41,
        "skipped_collections": 3,
        "collection_seconds": 0.0042,
        "error": "",
    }
    series = parse(scrape(feed([report])))
    assert one(series, "neuron_monitor_daemon_info", version="0.1.0") == 1.0
    assert one(series, "neuron_monitor_daemon_skipped_collections_total") == 3
    assert one(series, "neuron_monitor_daemon_collection_duration_seconds") == 0.0042
    assert one(series, "neuron_monitor_daemon_start_time_seconds") == 1.7e9
    assert not select(series, "neuron_monitor_daemon_error")  # served only while there is an error
    blind = "Neuron applications not listed: neuron0: opening it failed: Permission denied"
    report["neuron_monitor"]["error"] = blind
    assert one(parse(scrape(feed([report]))), "neuron_monitor_daemon_error") == 1.0
    aws_style = trn2_report([runtime(1, "a", [0])])
    del aws_style["neuron_monitor"]
    assert not select(parse(scrape(feed([aws_style]))), "neuron_monitor_daemon_info")


def test_the_driver_version_the_daemon_read_is_an_info_series_and_absent_when_unread() -> None:
    report = trn2_report([runtime(1, "a", [0])])
    report["neuron_monitor"] = {"version": "0.1.0", "driver_version": "2.31.7.0", "sources": {}, "error": ""}
    series = parse(scrape(feed([report])))
    assert one(series, "neuron_driver_info", version="2.31.7.0") == 1.0
    report["neuron_monitor"]["driver_version"] = ""  # the daemon could not read /sys/module/neuron/version
    assert not select(parse(scrape(feed([report]))), "neuron_driver_info")
    report["neuron_monitor"]["driver_version"] = "9" * 5000  # no longer than the daemon ever reads
    (labels,) = select(parse(scrape(feed([report]))), "neuron_driver_info")
    assert dict(labels)["version"] == "9" * 64
    del report["neuron_monitor"]  # AWS's daemon says nothing of the driver
    assert not select(parse(scrape(feed([report]))), "neuron_driver_info")
