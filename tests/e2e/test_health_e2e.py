"""Device health end to end with the real parts: the simulator (a process), ``neuron-monitor`` on a plain
``{"period": "5s"}`` configuration piped into ``neuron-monitor-prometheus``, and ``neuron-monitor-health --url``.

/readyz is 503 before a report with device data and 200 after; a fault injected into the simulator's driver files
reaches the report, /metrics and the CLI (exit 1) and clears again (exit 0); its fault event is counted once. The
finding's ``since`` (taken by the daemon's watch) is compared with the simulator's own record of when it wrote the
fault: it is taken after the fault (how soon after is tests/test_health_watch.py's property, on a stepped clock:
a wall-clock bound here would fail whenever a busy machine starves the daemon). Waits use deadlines, never fixed
sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.conftest import REPO, daemon_cmd
from tests.exporters.prometheus.prom_helpers import parse, select
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import trn2_report

pytestmark = pytest.mark.e2e
DEADLINE = 60.0


def health_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.health.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + DEADLINE
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {DEADLINE} s: {what}")
        time.sleep(0.2)


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[tuple[TemporarySimulator, ExporterProcess]]:
    conf = tmp_path / "plain.conf"
    conf.write_text('{"period": "5s"}')
    with TemporarySimulator("inf2.24xlarge", runtimes=1, seed=3) as sim:
        daemon = subprocess.Popen(
            daemon_cmd("--root", str(sim.root), "-c", str(conf), "--no-imds"),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        exporter = ExporterProcess("--series-detail", "full", stdin=daemon.stdout)  # the since gauge is detail
        try:
            yield sim, exporter
        finally:
            exporter.stop()
            daemon.terminate()
            daemon.wait(timeout=15)


def _value(body: str, name: str, **labels: str) -> float | None:
    found = select(parse(body), name, **labels)
    return float(next(iter(found.values()))) if len(found) == 1 else None


def metrics_when(exporter: ExporterProcess, what: str, name: str, **labels: str) -> str:
    """/metrics once ``name{labels}`` is 1 or more (within the deadline)."""

    def check() -> str | None:
        body = exporter.get("/metrics")[2]
        value = _value(body, name, **labels)
        return body if value is not None and value >= 1 else None

    return wait_for(f"{what} on /metrics", check)  # type: ignore[no-any-return]


def test_fault_reaches_report_exporter_and_cli_then_clears(
    pipeline: tuple[TemporarySimulator, ExporterProcess],
) -> None:
    sim, exporter = pipeline
    url = f"http://127.0.0.1:{exporter.port}"
    wait_for("/readyz 200", lambda: exporter.get("/readyz")[0] == 200)
    assert exporter.get("/healthz")[0] == 200
    done = health_cli("--url", url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("healthy: 6 Neuron devices")

    fault = sim.command("unhealthy", device=4, component="hbm")
    body = metrics_when(
        exporter, "unhealthy verdict", "neuron_device_health_state", neuron_device_index="4", state="unhealthy"
    )
    assert _value(body, "neuron_node_health_state", state="unhealthy") == 1
    assert _value(body, "neuron_device_health_reason", neuron_device_index="4", rule="unhealthy_component",
                  detail="hbm", severity="unhealthy") == 1  # fmt: skip
    assert _value(body, "neuron_device_health_state", neuron_device_index="3", state="healthy") == 1
    since = _value(body, "neuron_device_health_state_since_timestamp_seconds", neuron_device_index="4")
    # taken after the fault was written; how soon after is the watch's property, shown on a stepped clock in
    # tests/test_health_watch.py (a wall-clock bound here fails when this busy machine starves the daemon)
    assert since is not None and since >= fault["t"] - 0.1
    done = health_cli("--url", url, "--json")
    assert done.returncode == 1
    verdict = json.loads(done.stdout)
    assert verdict["state"] == "unhealthy"
    assert next(d for d in verdict["devices"] if d["neuron_device_index"] == "4")["reasons"] == [
        "unhealthy_component hbm"
    ]

    sim.command("healthy", device=4)
    wait_for("exit 0 again", lambda: health_cli("--url", url, "--brief").returncode == 0)
    body = metrics_when(
        exporter, "the event counted", "neuron_device_fault_events_total", neuron_device_index="4",
        kind="health_component",
    )  # fmt: skip
    assert _value(body, "neuron_device_fault_events_total", neuron_device_index="4", kind="health_component") == 1
    assert _value(body, "neuron_device_fault_events_total", neuron_device_index="3", kind="health_component") == 0


def test_readyz_waits_for_a_report_with_device_data() -> None:
    exporter = ExporterProcess()
    try:
        assert exporter.get("/readyz")[0] == 503
        no_devices = trn2_report([])
        no_devices["neuron_hardware_info"]["neuron_device_count"] = 0
        exporter.send(no_devices)
        wait_for("the report applied", lambda: exporter.get("/healthz")[0] == 200)
        assert exporter.get("/readyz")[0] == 503
        exporter.send(trn2_report([]))
        wait_for("/readyz 200", lambda: exporter.get("/readyz")[0] == 200)
        assert exporter.get("/readyz")[2].strip() == "ready"
    finally:
        exporter.stop()


def test_cli_without_an_exporter_cannot_tell() -> None:
    done = health_cli("--url", "http://127.0.0.1:9", "--timeout", "2")
    assert done.returncode == 2 and done.stdout.startswith("unknown: ")
    done = health_cli("--url", "ftp://x")
    assert done.returncode == 2


@contextlib.contextmanager
def _pipeline_on(root: Path, tmp_path: Path) -> Iterator[ExporterProcess]:
    """The real daemon on ``root`` (every group, each second) piped into a real exporter, stopped on leaving."""
    conf = tmp_path / "plain.conf"
    conf.write_text('{"period": "1s"}')
    daemon = subprocess.Popen(
        daemon_cmd("--root", str(root), "-c", str(conf), "--no-imds"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    exporter = ExporterProcess(stdin=daemon.stdout)
    try:
        yield exporter
    finally:
        exporter.stop()
        daemon.terminate()
        daemon.wait(timeout=15)


def test_a_blind_device_is_never_healthy_end_to_end(tmp_path: Path) -> None:
    """A device whose ECC and health nodes the daemon cannot find: the report leaves its ECC counters out (no
    series, not a zero), its verdict is unknown naming them, /readyz is 503 saying why, the CLI exits 2."""
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=5) as sim:
        hardware = sim.root / "sys/devices/virtual/neuron_device/neuron2/stats/hardware"
        for name in ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "health_status/unhealthy_components"):
            (hardware / name).unlink()
        with _pipeline_on(sim.root, tmp_path) as exporter:
            _, _, text = wait_for(
                "/readyz naming the missing nodes",
                lambda: (got := exporter.get("/readyz"))[0] == 503 and "mem_ecc_uncorrected" in got[2] and got,
            )
            assert "hardware/mem_ecc_uncorrected on neuron_device 2" in text
            assert "health_status/unhealthy_components on neuron_device 2" in text
            url = f"http://127.0.0.1:{exporter.port}"
            done = health_cli("--url", url)
            assert done.returncode == 2, done.stdout
            # /readyz answers from the newest report counted, /metrics from the last complete publication: waited for
            body = metrics_when(exporter, "device 2 unknown", "neuron_device_health_state", neuron_device_index="2",
                                state="unknown")  # fmt: skip
            assert _value(body, "neuron_device_health_state", neuron_device_index="3", state="healthy") == 1
            ecc = select(parse(body), "hardware_ecc_events_total", neuron_device_index="2")
            assert {dict(labels)["event_type"] for labels in ecc} == {
                "mem_ecc_corrected",
                "sram_ecc_corrected",
                "mem_ecc_repairable_uncorrected",  # from neuron_device_telemetry
            }  # the two counters it could not read serve no series, not a zero
            done = health_cli("--root", str(sim.root))
            assert done.returncode == 2 and "signal_missing" in done.stdout


def test_a_health_file_that_cannot_be_read_makes_readyz_503(tmp_path: Path) -> None:
    """A health file there but unreadable (a FIFO stands for it: refused by every reader, whoever runs it; as a
    non-root user a root-only file is the same): the verdict is unknown by ``signal_unreadable``, and /readyz is
    503 naming it, as for a node the daemon does not find (before: 200, the rollout went on blind)."""
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=5) as sim:
        ecc = sim.root / "sys/devices/virtual/neuron_device/neuron4/stats/hardware/mem_ecc_uncorrected"
        ecc.unlink()
        os.mkfifo(ecc)
        with _pipeline_on(sim.root, tmp_path) as exporter:
            _, _, text = wait_for(
                "/readyz naming the unreadable file",
                lambda: (got := exporter.get("/readyz"))[0] == 503 and "cannot read" in got[2] and got,
            )
            assert "cannot read mem_ecc_uncorrected on neuron_device 4" in text, text
            # /readyz answers from the newest report counted, /metrics from the last complete publication: waited for
            metrics_when(exporter, "device 4 unknown", "neuron_device_health_state", neuron_device_index="4",
                         state="unknown")  # fmt: skip
