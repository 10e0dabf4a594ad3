"""neuron_monitor_source_found end to end: the real daemon on a simulated trn2.48xlarge (on a reorganized layout,
and with device 3 built without its ECC and health nodes) feeds the real exporter process; /metrics says what
`--check` says: every group's ``all`` is 1 where everything is found, 0 naming the required families missing."""

from __future__ import annotations

import subprocess

import pytest

from neuron_monitor.sim.layouts import REORGANIZED
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.conftest import daemon_cmd
from tests.exporters.prometheus.prom_helpers import one, parse, select
from tests.exporters.prometheus.prom_process import ExporterProcess

FAMILY = "neuron_monitor_source_found"


def _series(options: dict[str, object]) -> dict:  # type: ignore[type-arg]
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=4, **options) as sim:  # type: ignore[arg-type]
        out = subprocess.run(daemon_cmd("--root", str(sim.root), "--once", "--no-imds"), capture_output=True,
                             timeout=300, check=True)  # fmt: skip
    exporter = ExporterProcess()
    try:
        exporter.send(out.stdout.strip().splitlines()[-1])
        body = exporter.wait_for("/metrics", lambda status, text: FAMILY in text, timeout=60)
    finally:
        exporter.stop()
    return parse(body)


@pytest.mark.parametrize("driver", sorted(REORGANIZED))
def test_found_everywhere_on_a_reorganized_layout(driver: str) -> None:
    series = _series({"driver": driver})
    groups = {dict(labels)["group"] for labels in select(series, FAMILY)}
    assert {"neuron_hw_counters", "neuron_device_telemetry", "neuron_device_health"} <= groups
    for group in groups:
        assert one(series, FAMILY, group=group, source="all") == 1.0
    assert len(select(series, FAMILY)) == len(groups)  # the default budget: one series per group


def test_missing_nodes_reach_prometheus_named() -> None:
    series = _series({"absent_nodes": {"3": ["ecc", "health"]}})
    assert one(series, FAMILY, group="neuron_device_health", source="all") == 0.0
    assert one(series, FAMILY, group="neuron_device_health", source="health_status/unhealthy_components") == 0.0
    assert one(series, FAMILY, group="neuron_hw_counters", source="hardware/mem_ecc_uncorrected") == 0.0
