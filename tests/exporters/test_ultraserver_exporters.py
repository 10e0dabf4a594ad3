"""instance_info.ultraserver_id (and the UltraServer node keys) through both exporters: the Prometheus
``ultraserver_id`` instance label, the CloudWatch ``UltraServer`` dimension (the agent's name for it)."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from neuron_monitor.exporters.cloudwatch.dimensions import DimensionScheme
from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from tests.exporters.prometheus.prom_helpers import feed, label_names, one, parse, scrape
from tests.exporters.prometheus.prom_reports import CWAGENT_REPORT

ULTRASERVER = {
    "ultraserver_id": "u-cafb07773a569a23",
    "ultraserver_node_id": 2,
    "ultraserver_node_count": 4,
    "ultraserver_modes": "X4,X2H,X1",
}


def member_report() -> dict[str, Any]:
    report = orjson.loads(CWAGENT_REPORT.read_bytes())
    report["instance_info"].update(ULTRASERVER)
    return report


def test_prometheus_puts_ultraserver_id_on_every_series_and_node_keys_on_instance_info() -> None:
    series = parse(scrape(feed([member_report()])))
    for name in ("neuroncore_utilization_ratio", "hardware_ecc_events_total", "neuron_hardware_info"):
        assert all("ultraserver_id" in names for names in label_names(series, name)), name
    assert (
        one(
            series,
            "instance_info",
            ultraserver_id="u-cafb07773a569a23",
            ultraserver_node_id="2",
            ultraserver_node_count="4",
            ultraserver_modes="X4,X2H,X1",
        )
        == 1
    )


def test_prometheus_without_ultraserver_keeps_awss_instance_labels() -> None:
    series = parse(scrape(feed([orjson.loads(CWAGENT_REPORT.read_bytes())])))
    assert all("ultraserver_id" not in n for (_, labels) in series for n, _ in labels)
    assert all("ultraserver_node_id" not in n for n in next(iter(label_names(series, "instance_info"))))


def test_cloudwatch_adds_the_ultraserver_dimension_in_both_presets() -> None:
    report = member_report()
    for scheme in (DimensionScheme(), DimensionScheme("container-insights", cluster_name="c", node_name="n")):
        datums = ReportMapper(scheme).map(copy.deepcopy(report), now=1.0)
        assert datums
        assert all(dict(d.dims).get("UltraServer") == "u-cafb07773a569a23" for d in datums), scheme.preset
    plain = ReportMapper().map(orjson.loads(CWAGENT_REPORT.read_bytes()), now=1.0)
    assert plain and not any("UltraServer" in dict(d.dims) for d in plain)
