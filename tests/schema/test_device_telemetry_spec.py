"""The neuron_device_telemetry spec: one body as the daemon writes it reaches Prometheus (the names issue 12 fixes),
CloudWatch (units and device/core dimensions) and the timeline (power and busy tracks); hostile values are
skipped and counted, never raised."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.groups.neuron_device_telemetry import spec as T
from neuron_monitor.schema.values import Problems
from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.selection import Selection
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.schema.conftest import aws_reports
from tests.timeline import tef
from tests.timeline.factory import record

BODY: dict[str, Any] = {
    "period": 1.0,
    "fresh": True,
    "error": "",
    "neuron_devices": [
        {
            "neuron_device_index": 0,
            "power": {"status": "VALID", "sample_time": 1789180860, "min_percent": 10.0, "max_percent": 30.0,
                      "avg_percent": 20.0},
            "healthy": True,
            "unhealthy_components": [],
            "ecc": {"mem_ecc_repairable_uncorrected": 2},
            "device_memory": {"tensors": {"used_bytes": 1024, "peak_bytes": 2048}},
            "host_memory": {"dma_buffers": {"used_bytes": 512, "peak_bytes": 512}},
            "neuroncores": {"0": {"busy_ratio": 0.5, "execution_status": {"success": 3}}},
        },
        {
            "neuron_device_index": 1,
            "power": {"status": "NO_DATA", "sample_time": 1789180860},
            "healthy": False,
            "unhealthy_components": ["hbm", "link_efa"],
            "ecc": {"mem_ecc_repairable_uncorrected": 0},
            "neuroncores": {"2": {"busy_ratio": 0.25}},
        },
    ],
}  # fmt: skip


def _report(time: float, body: dict[str, Any] | None = None) -> dict[str, Any]:
    report = copy.deepcopy(aws_reports()[-1])
    report["report_time"] = time
    report["system_data"][T.NAME] = copy.deepcopy(body or BODY)
    return report


def test_prometheus_names_and_values() -> None:
    series = parse(scrape(feed([_report(1000.0), _report(1001.0)], ShapeOptions(series_detail="full"))))
    assert one(series, "neuron_device_power_utilization_ratio", neuron_device_index="0", stat="avg") == 0.2
    assert one(series, "neuron_device_power_status", neuron_device_index="1", status="NO_DATA") == 1.0
    assert one(series, "neuron_device_power_status", neuron_device_index="1", status="VALID") == 0.0
    assert not [s for s in series if s[0] == "neuron_device_power_utilization_ratio" and 'index="1"' in str(s)]
    assert one(series, "neuron_device_healthy", neuron_device_index="0") == 1.0
    assert one(series, "neuron_device_healthy", neuron_device_index="1") == 0.0
    assert one(series, "neuron_device_unhealthy_component", neuron_device_index="1", component="link_efa") == 1.0
    assert one(series, "neuron_device_memory_used_bytes", neuron_device_index="0", category="tensors") == 1024
    assert one(series, "neuron_device_memory_peak_bytes", neuron_device_index="0", category="tensors") == 2048
    assert one(series, "neuron_host_memory_used_bytes", neuron_device_index="0", category="dma_buffers") == 512
    assert one(series, "neuroncore_busy_ratio", neuroncore="2", neuron_device_index="1") == 0.25
    # the family of neuron_hw_counters' ECC events (whose devices -- only 0 in this AWS report -- it keeps)
    ecc = one(series, "hardware_ecc_events_total", neuron_device_index="0", event_type="mem_ecc_repairable_uncorrected")
    assert ecc == 4.0  # two fresh reports of 2
    assert one(series, "neuroncore_device_executions_total", neuroncore="0", status="success") == 6.0


def test_cloudwatch_units_and_dimensions() -> None:
    by_name: dict[str, list[Any]] = {}
    for d in ReportMapper().map(_report(1000.0)):
        by_name.setdefault(d.name, []).append(d)
    assert by_name["NeuronDevicePowerUtilizationAvg"][0].value == 20.0
    assert by_name["NeuronDevicePowerUtilizationAvg"][0].unit == "Percent"
    assert len(by_name["NeuronDevicePowerUtilizationAvg"]) == 1  # NO_DATA sends nothing
    assert sorted(d.value for d in by_name["NeuronDeviceHealthy"]) == [0.0, 1.0]
    assert by_name["NeuronDeviceUnhealthyLinkEfa"][0].value == 1.0
    assert by_name["NeuronDeviceMemoryUsedTensors"][0].unit == "Bytes"
    assert by_name["NeuronDeviceMemEccRepairableUncorrected"][0].unit == "Count"
    busy = by_name["NeuronCoreBusy"]
    assert sorted(d.value for d in busy) == [25.0, 50.0] and busy[0].unit == "Percent"
    assert all("NeuronDevice" in dict(d.dims) and "NeuronCore" in dict(d.dims) for d in busy)


def test_timeline_tracks(tmp_path: Path) -> None:
    rec = record(tmp_path / "r.gz", [_report(1000.0), _report(1001.0)])
    out = tmp_path / "t.json"
    run([str(rec)], Selection(), Detector(Selection()), str(out))
    counters = tef.counters(tef.check_trace(out))
    power = [v for k, v in counters.items() if k.endswith("ND 0 power")]
    busy = [v for k, v in counters.items() if k.endswith(" busy")]
    assert power and power[0][0][1] == {"min": 10.0, "max": 30.0, "avg": 20.0}
    assert sorted(v[0][1]["busy"] for v in busy) == [0.25, 0.5]


def test_hostile_values_are_skipped_not_raised() -> None:
    body = {
        "neuron_devices": [
            {"neuron_device_index": "x", "power": "hot", "healthy": "yes", "unhealthy_components": "hbm",
             "ecc": {"mem_ecc_repairable_uncorrected": "many"}, "device_memory": [1],
             "neuroncores": {"0": {"busy_ratio": "half", "execution_status": {"success": None}}}},
            7,
        ]
    }  # fmt: skip
    problems = Problems()
    value = T.read(body, "system_data.neuron_device_telemetry", problems)
    assert problems.counts  # the ECC count is a per-period count: a consumer must not accept the report
    dev = value.devices[0]
    assert dev.ecc == {} and dev.power == {} and dev.cores["0"].busy_ratio is None and dev.healthy is None
    assert list(T.gauges(value)) is not None
