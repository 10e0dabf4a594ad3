"""neuron_monitor_source_found from the report's neuron_monitor.sources: the per-group ``all`` series (only the
required families count), every family with full detail, the missing required ones within the default budget,
none for a report without sources (AWS's daemon). End to end with the real daemon: tests/check/."""

from __future__ import annotations

from typing import Any

from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape, select
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

FAMILY = "neuron_monitor_source_found"
HEALTH_FAMILIES = ["health_status/unhealthy_components", "hardware/mem_ecc_uncorrected", "power/utilization"]


def _report(found: dict[str, dict[str, bool]], required: dict[str, list[str]]) -> dict[str, Any]:
    report = trn2_report([runtime(1, "a", [0])])
    report["neuron_monitor"] = {
        "version": "0.1.0",
        "driver_version": "2.31.7.0",
        "sources": {g: {"layout": "discovered", "found": f, "required": required.get(g, [])} for g, f in found.items()},
    }
    return report


def test_all_is_one_when_every_required_family_is_found() -> None:
    found = {
        "neuron_device_health": dict.fromkeys(HEALTH_FAMILIES, True),
        "neuron_hw_counters": {"hardware/mem_ecc_uncorrected": True, "hardware/mem_ecc_corrected": False},
    }
    required = {"neuron_device_health": HEALTH_FAMILIES, "neuron_hw_counters": ["hardware/mem_ecc_uncorrected"]}
    series = parse(scrape(feed([_report(found, required)])))  # default budget
    assert one(series, FAMILY, group="neuron_device_health", source="all") == 1.0
    assert one(series, FAMILY, group="neuron_hw_counters", source="all") == 1.0  # corrected ECC: not required
    assert len(select(series, FAMILY)) == 2  # one series per group within the budget
    full = parse(scrape(feed([_report(found, required)], ShapeOptions(series_detail="full"))))
    assert one(full, FAMILY, group="neuron_hw_counters", source="hardware/mem_ecc_corrected") == 0.0
    assert one(full, FAMILY, group="neuron_device_health", source="power/utilization") == 1.0
    assert len(select(full, FAMILY)) == 2 + 3 + 2


def test_a_missing_required_family_makes_all_zero_and_is_named() -> None:
    found = {"neuron_device_health": {**dict.fromkeys(HEALTH_FAMILIES, True), HEALTH_FAMILIES[0]: False}}
    series = parse(scrape(feed([_report(found, {"neuron_device_health": HEALTH_FAMILIES})])))
    assert one(series, FAMILY, group="neuron_device_health", source="all") == 0.0
    assert one(series, FAMILY, group="neuron_device_health", source=HEALTH_FAMILIES[0]) == 0.0
    assert len(select(series, FAMILY)) == 2


def test_no_sources_no_series() -> None:
    report = trn2_report([runtime(1, "a", [0])])
    report.pop("neuron_monitor", None)
    assert not select(parse(scrape(feed([report]))), FAMILY)
