"""End to end with the real parts: simulator -> neuron-monitor daemon -> exporter -> a real Prometheus server.

Two simulated nodes (trn2.48xlarge with 3 runtimes, trn1.2xlarge with 1), each with its own daemon and exporter,
scraped every second by one Prometheus. Checks: every PromQL expression of the Grafana dashboard returns data;
the fleet panels aggregate across both nodes; a stopped runtime's series disappear; counter totals equal the
simulator's ground truth.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.schema.spec import registry
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.exporters.prometheus.prom_helpers import start_daemon
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_server import PROMETHEUS, PrometheusServer
from tests.exporters.prometheus.test_prom_dashboard import dashboard_exprs

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="the prometheus server is not installed"),
]

# every group the daemon has (a new group's dashboard row is checked here without editing this file)
RUNTIME_GROUPS = tuple(registry().runtime)
SYSTEM_GROUPS = tuple(registry().system)
COUNTERS = ("completed", "generic")


class Node:
    """One simulated host: simulator, daemon (1 s period) and exporter, piped as in production."""

    def __init__(self, workdir: Path, shape: str, runtimes: int, seed: int) -> None:
        self.sim = TemporarySimulator(shape, runtimes=runtimes, seed=seed, exec_rate=40, ecc_rate=0, errors=True)
        self.sim.start()
        self.sim.pause()  # the daemon counts from its start: the truth before it is the baseline
        self.before = {
            (rt["tag"], c): self.sim.truth.total(rt["tag"], c) for rt in self.sim.truth.runtimes() for c in COUNTERS
        }
        self.daemon = start_daemon(self.sim.root, workdir / f"{shape}.conf", RUNTIME_GROUPS, SYSTEM_GROUPS)
        self.exporter = ExporterProcess(stdin=self.daemon.stdout)
        assert self.daemon.stdout is not None
        self.daemon.stdout.close()  # the exporter holds the pipe now
        self.target = f"127.0.0.1:{self.exporter.port}"
        self.exporter.wait_for("/metrics", lambda s, b: "neuron_exporter_reports_total 1.0" in b, timeout=30)
        self.sim.resume()
        self.sim.inject("ecc_corrected", device=0, count=3, memory="mem")
        self.sim.inject("ecc_corrected", device=0, count=2, memory="sram")
        self.sim.inject("ecc_repairable", device=0, count=4)
        self.sim.inject("unhealthy", device=0, component="hbm")
        self.sim.inject("power_no_data", device=0)

    def stop(self) -> None:
        self.daemon.terminate()
        self.daemon.wait(15)
        self.exporter.stop()
        self.sim.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, native_mode: str) -> Iterator[tuple[list[Node], PrometheusServer]]:
    """Made again for each mode (``native_mode``): the tests change it (faults, a runtime stopped), and the pure
    mode's daemons and exporters must be pure ones."""
    workdir = tmp_path_factory.mktemp("fleet")
    nodes: list[Node] = []
    prom = None
    try:
        nodes.append(Node(workdir, "trn2.48xlarge", 3, seed=3))
        nodes.append(Node(workdir, "trn1.2xlarge", 1, seed=4))
        prom = PrometheusServer(workdir, [n.target for n in nodes])
        prom.wait_value("count(neuron_exporter_up == 1)", lambda v: v == 2, timeout=60)
        yield nodes, prom
    finally:
        if prom is not None:
            prom.stop()
        for n in nodes:
            n.stop()


def _instantiate(expr: str) -> str:
    return expr.replace("$instance", ".*").replace("$runtime", ".*").replace("$__rate_interval", "10s")


def test_every_dashboard_query_returns_data(fleet: tuple[list[Node], PrometheusServer]) -> None:
    _, prom = fleet
    # ALERTS needs the alerting rules, which this Prometheus does not load: test_alerts_e2e.py covers that panel
    missing = [_instantiate(e) for e in dashboard_exprs() if not e.startswith("ALERTS")]
    # faults that happen while Prometheus scrapes (panels of increases and of ports down need a change to show):
    # an uncorrected ECC error, impaired EFA connections and an EFA link down on the trn2.48xlarge
    big = fleet[0][0]
    big.sim.inject("ecc_uncorrected", device=3, count=1)
    big.sim.inject("efa_impaired", adapter=0, count=2)
    big.sim.inject("efa_link_down", adapter=1)
    deadline = time.monotonic() + 40
    while missing and time.monotonic() < deadline:
        missing = [e for e in missing if not prom.query(e)]
        if missing:
            time.sleep(1)
    assert not missing, f"no data for: {missing}"


def test_fleet_panels_aggregate_across_nodes(fleet: tuple[list[Node], PrometheusServer]) -> None:
    nodes, prom = fleet
    exprs = {e: _instantiate(e) for e in dashboard_exprs()}
    by_title = {}
    doc = json.loads((Path(__file__).resolve().parents[3] / "dashboards" / "neuron-monitor.json").read_text())
    for p in doc["panels"]:
        for t in p.get("targets", []):
            by_title[p["title"]] = exprs[t["expr"]]
    assert prom.wait_value(by_title["Nodes reporting"], lambda v: v == 2) == 2
    assert prom.wait_value(by_title["Neuron runtimes"], lambda v: v == 4) == 4
    per_node = prom.query(by_title["NeuronCore utilization by node"])
    assert {r["metric"]["instance"] for r in per_node} == {n.target for n in nodes}
    fleet_avg = prom.value(by_title["NeuronCore utilization"])
    assert fleet_avg is not None and 0 < fleet_avg <= 1
    vcpus = prom.value("sum(system_vcpu_count)")
    assert vcpus == 192 + 8
    assert prom.value(by_title["Nodes not reporting"]) == 0


def test_stopped_runtime_series_disappear(fleet: tuple[list[Node], PrometheusServer]) -> None:
    nodes, prom = fleet
    big = nodes[0]
    sel = f'instance="{big.target}",runtime_tag="job-02"'
    prom.wait_value(f"count({{{sel}}})", lambda v: v is not None and v > 10)
    big.sim.stop_runtime("job-02")
    big.exporter.wait_for("/metrics", lambda s, b: 'runtime_tag="job-02"' not in b, timeout=15)
    prom.wait_value(f"count({{{sel}}})", lambda v: v is None, timeout=15)
    assert prom.value(f'count({{instance="{big.target}",runtime_tag="job-00"}})')  # the others stay


def test_device_telemetry_reaches_prometheus(fleet: tuple[list[Node], PrometheusServer]) -> None:
    """The neuron_device_telemetry faults, by the names the alert rules (deploy/prometheus/) use."""
    nodes, prom = fleet
    for node in nodes:
        inst = f'instance="{node.target}"'
        event = 'event_type="mem_ecc_repairable_uncorrected"'
        expr = f'sum(hardware_ecc_events_total{{{inst},neuron_device_index="0",{event}}})'
        assert prom.wait_value(expr, lambda v: v == 4, timeout=30) == 4
        unhealthy = f'count(neuron_device_unhealthy_component{{{inst},neuron_device_index="0",component="hbm"}} == 1)'
        assert prom.wait_value(unhealthy, lambda v: v == 1, timeout=30) == 1
        # the driver's flag reaches the rules through the health verdict (neuron_device_healthy is detail)
        verdict = f'neuron_device_health_state{{{inst},neuron_device_index="0",state="unhealthy"}}'
        assert prom.wait_value(verdict, lambda v: v == 1, timeout=30) == 1
        assert not prom.query(f"neuron_device_healthy{{{inst}}}")
        if node is nodes[0]:
            healthy = f'neuron_device_health_state{{{inst},neuron_device_index="1",state="healthy"}}'
            assert prom.value(healthy) == 1
        # the power status is detail (--series-detail full); without a valid roll-up no power series is served
        assert not prom.query(f"neuron_device_power_status{{{inst}}}")
        assert not prom.query(f'neuron_device_power_utilization_ratio{{{inst},neuron_device_index="0"}}')
        used = prom.value(f"sum(neuron_device_memory_used_bytes{{{inst}}})")
        assert used is not None and used > 0
        busy = prom.query(f"neuroncore_busy_ratio{{{inst}}}")
        assert busy and all(0 <= float(r["value"][1]) <= 1 for r in busy)
        used_by_runtimes = prom.value(f"sum(neuroncore_utilization_ratio{{{inst}}})")
        assert used_by_runtimes is not None and used_by_runtimes > 0
        # the series budget serves the total over runtimes only for cores more than one runtime reports: none here
        assert not prom.query(f"neuroncore_utilization_total_ratio{{{inst}}}")


def test_counter_totals_equal_ground_truth(fleet: tuple[list[Node], PrometheusServer]) -> None:
    nodes, prom = fleet
    for node in nodes:
        node.sim.pause()
    for node in nodes:
        for start in node.sim.truth.runtimes():
            tag = start["tag"]
            if tag == "job-02" and node is nodes[0]:
                continue  # stopped above: its series are gone
            for counter, family, label in (
                ("completed", "execution_status_total", "status_type"),
                ("generic", "execution_errors_total", "error_type"),
            ):
                truth = node.sim.truth.total(tag, counter) - node.before[(tag, counter)]
                expr = f'sum({family}{{instance="{node.target}",runtime_tag="{tag}",{label}="{counter}"}})'
                got = prom.wait_value(expr, lambda v, t=truth: v == t, timeout=20)
                assert got == truth
            assert node.sim.truth.total(tag, "completed") > node.before[(tag, "completed")]
        for device, event, injected in ((0, "mem_ecc_corrected", 3), (0, "sram_ecc_corrected", 2)):
            expr = (
                f'sum(hardware_ecc_events_total{{instance="{node.target}",neuron_device_index="{device}",'
                f'event_type="{event}"}})'
            )
            assert prom.wait_value(expr, lambda v, t=injected: v == t, timeout=20) == injected
