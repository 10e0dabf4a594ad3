"""End to end for the device, EFA and blind-daemon alerts: a simulated trn1.32xlarge (16 devices, 8 EFA adapters) ->
the daemon with the shipped configuration's groups -> exporter -> a real Prometheus loading the rules with the
shortened times of test_alerts_e2e.py.

Before any fault nothing may be active. Then, faults the driver or the host would produce: before the daemon starts,
device 6 built without its ECC counter files (a driver that does not expose them where the daemon looks) and
/dev/neuron9 replaced by a FIFO (a device node the daemon cannot use: its applications cannot be listed); while it
runs, EFA port faults (link down, a retransmit storm, impaired peers), a repairable HBM error, power telemetry
NO_DATA, a component the driver reports unhealthy and a hardware error event. Each must raise exactly its alert, on
its device or port, and no other alert may fire (the pipeline's timing alerts are exempt, as in test_alerts_e2e.py).
Last, the daemon is stopped without closing the pipe (SIGSTOP: a hung daemon, whose FIFO end stays open as in the
DaemonSet): NeuronExporterInputStale must fire, without saying stdin closed. Every wait has a generous deadline.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.exporters.prometheus.alert_pipeline import LOAD_SENSITIVE, RULES, Pipeline, alerting, wait_firing
from tests.exporters.prometheus.prom_server import PROMETHEUS, PrometheusServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="the prometheus server is not installed"),
]

REPO = Path(__file__).resolve().parents[3]
RUNTIME_GROUPS = ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")
SYSTEM_GROUPS = (
    "vcpu_usage",
    "memory_info",
    "neuron_hw_counters",
    "neuron_device_telemetry",
    "neuron_device_health",
    "efa_counters",
)
# (alert, what it is about: its EFA adapter, else its device, else its group, else "")
EXPECTED = {
    ("NeuronEfaLinkDown", "rdmap11s0"),  # the simulator's adapter 1 (adapter i: rdmap{8 i + 3}s0)
    ("NeuronEfaRetransmitRatioHigh", "rdmap3s0"),
    ("NeuronEfaImpairedConnections", "rdmap19s0"),
    ("NeuronDeviceRepairableEccGrowing", "3"),
    ("NeuronDeviceHealthUnknown", "5"),  # power telemetry NO_DATA
    ("NeuronDeviceHealthUnknown", "6"),  # its ECC counters not found: signal_missing
    ("NeuronDeviceUnhealthy", "7"),  # unhealthy component link_efa
    ("NeuronDeviceUnhealthy", "8"),  # hardware error event
    # device 6's ECC counters, for each group that reads them
    ("NeuronMonitorSourceMissing", "neuron_hw_counters"),
    ("NeuronMonitorSourceMissing", "neuron_device_telemetry"),
    ("NeuronMonitorSourceMissing", "neuron_device_health"),
    ("NeuronMonitorDaemonBlind", ""),  # neuron9's applications cannot be listed
}


def _key(alert: dict[str, Any]) -> tuple[str, str]:
    labels = alert["labels"]
    about = labels.get("efa_device") or labels.get("neuron_device_index") or labels.get("group")
    return labels["alertname"], about or ""


def _prepare(root: Path) -> None:
    node = root / "dev" / "neuron9"
    node.unlink()
    os.mkfifo(node)  # opened by nobody but the daemon, which refuses it unopened


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory, native_mode: str) -> Iterator[tuple[Pipeline, PrometheusServer]]:
    """The simulated trn1.32xlarge with its build-time faults (device 6 without its ECC counter files, /dev/neuron9
    a FIFO), its daemon and exporter, and Prometheus; made again for each mode."""
    workdir = tmp_path_factory.mktemp("alerts-devices")

    def pipeline() -> Pipeline:
        sim = TemporarySimulator(
            "trn1.32xlarge", runtimes=2, seed=3, exec_rate=100, ecc_rate=0, absent_nodes={6: ["ecc"]}
        )
        return Pipeline(workdir, sim, RUNTIME_GROUPS, SYSTEM_GROUPS, prepare=_prepare)

    ready = [("sum(neuron_exporter_up)", lambda v: v == 1), ("count(efa_link_up == 1)", lambda v: v == 8)]
    with alerting(workdir, pipeline, ready, timeout=120) as made:
        yield made


def test_device_and_efa_faults_raise_their_alerts_and_nothing_else(
    system: tuple[Pipeline, PrometheusServer],
) -> None:
    pipeline, prom = system
    sim = pipeline.sim
    all_alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    # the build-time faults are there from the first report; the live ones go in now
    for kind, params in (
        ("efa_link_down", {"adapter": 1}),
        ("efa_retrans_storm", {"adapter": 0, "share": 0.1}),
        ("efa_impaired", {"adapter": 2, "count": 3}),
        ("ecc_repairable", {"device": 3, "count": 2}),
        ("power_no_data", {"device": 5}),
        ("unhealthy", {"device": 7, "component": "link_efa"}),
        ("hw_error_event", {"device": 8, "count": 1}),
    ):
        assert sim.command(kind, **params)["ok"], kind

    seen = wait_firing(prom, EXPECTED, _key, timeout=240)

    for alert in seen.values():
        assert alert["labels"]["instance"] == pipeline.target
        for text in alert["annotations"].values():
            assert "error expanding template" not in text and "<no value>" not in text, text
        assert alert["annotations"]["runbook_url"].endswith("#" + alert["labels"]["alertname"].lower())
    for group, node in (
        ("neuron_hw_counters", "hardware/mem_ecc_uncorrected"),
        ("neuron_device_telemetry", "hardware/mem_ecc_repairable_uncorrected"),
        ("neuron_device_health", "hardware/mem_ecc_uncorrected"),
    ):
        description = seen[("NeuronMonitorSourceMissing", group)]["annotations"]["description"]
        assert f" {node}" in description, description
    assert "link_efa" in seen[("NeuronDeviceUnhealthy", "7")]["annotations"]["summary"]
    assert "hw_error_event" in seen[("NeuronDeviceUnhealthy", "8")]["annotations"]["summary"]
    assert "power_status" in seen[("NeuronDeviceHealthUnknown", "5")]["annotations"]["summary"]
    assert "signal_missing" in seen[("NeuronDeviceHealthUnknown", "6")]["annotations"]["summary"]
    assert seen[("NeuronEfaLinkDown", "rdmap11s0")]["labels"]["severity"] == "critical"

    expected_names = {name for name, _ in EXPECTED}
    active = {_key(a) for a in prom.alerts() if a["labels"]["alertname"] not in LOAD_SENSITIVE}
    # an alert named in EXPECTED fires only where expected (the windowed ones may have resolved since)
    assert {k for k in active if k[0] in expected_names} <= EXPECTED, active - EXPECTED
    unexpected = [a["labels"] for a in prom.alerts() if a["labels"]["alertname"] in all_alerts - expected_names]
    assert not [a for a in unexpected if a["alertname"] not in LOAD_SENSITIVE], unexpected


def test_a_daemon_that_stops_writing_raises_input_stale(system: tuple[Pipeline, PrometheusServer]) -> None:
    """The DaemonSet's case: the daemon hangs with its end of the pipe open (no EOF), the exporter's reports age."""
    pipeline, prom = system
    pipeline.daemon.send_signal(signal.SIGSTOP)
    seen = wait_firing(prom, {("NeuronExporterInputStale", "")}, _key, timeout=180)
    alert = seen[("NeuronExporterInputStale", "")]
    assert alert["labels"]["instance"] == pipeline.target
    assert "stdin is closed" not in alert["annotations"]["description"]
