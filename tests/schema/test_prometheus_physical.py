"""Per-physical-core utilization reaches the Prometheus exporter on trn2 (``v3d``) and trn3 (``v4d``): in process,
and through a real pipe ``neuron-monitor --simulate trn3.48xlarge --once | neuron-monitor-prometheus``."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest

from neuron_monitor.groups.neuroncore_counters import body as NCB
from neuron_monitor.schema import names as N
from tests.exporters.prometheus.prom_helpers import feed, parse, scrape, select
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.schema.conftest import REPO, simulated_report

PHYSICAL = "neuroncore_physical_utilization_ratio"


@pytest.mark.parametrize(("shape", "key", "version"), [("trn2.48xlarge", "v3d", "v3"), ("trn3.48xlarge", "v4d", "v4")])
def test_every_physical_core_is_served(shape: str, key: str, version: str) -> None:
    report = simulated_report(shape)
    series = parse(scrape(feed([report])))
    expected = {}
    for rt in report[N.NEURON_RUNTIME_DATA]:
        cores = rt["report"][N.NEURONCORE_COUNTERS][NCB.NEURONCORES_IN_USE]
        for core, data in cores.items():
            for name, pdata in data[key].items():
                expected[(rt["neuron_runtime_tag"], core, name)] = pdata["neuroncore_utilization"] / 100.0
    got = {
        (dict(labels)["runtime_tag"], dict(labels)["neuroncore"], dict(labels)["physical_neuroncore"]): value
        for labels, value in select(series, PHYSICAL).items()
    }
    assert len(expected) >= 64
    assert got == expected
    assert all(name.startswith(f"nc_{version}.") for _, _, name in got)


@pytest.mark.e2e
def test_trn3_pipe_serves_physical_series() -> None:
    daemon = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "trn3.48xlarge", "--once"],
        capture_output=True,
        check=True,
        timeout=120,
        cwd=REPO,
    )
    report = orjson.loads(next(line for line in daemon.stdout.splitlines() if line.strip()))
    expected = sum(
        len(core["v4d"])
        for rt in report[N.NEURON_RUNTIME_DATA]
        for core in rt["report"][N.NEURONCORE_COUNTERS][NCB.NEURONCORES_IN_USE].values()
    )
    assert expected >= 64
    exporter = ExporterProcess()
    try:
        exporter.send(daemon.stdout)
        deadline = time.monotonic() + 60
        count = 0
        while time.monotonic() < deadline:
            status, _, body = exporter.get("/metrics")
            count = len(select(parse(body), PHYSICAL)) if status == 200 else 0
            if count:
                break
            time.sleep(0.2)
        assert count == expected  # every physical core of every logical core in use
    finally:
        exporter.proc.terminate()
        exporter.proc.wait(timeout=10)
