"""The healthy simulator is healthy (issue 43 item 9): without a fault command or an error option no execution
fails, so neuron-monitor-det on a recording of `neuron-monitor --simulate` finds nothing; option ``errors`` (and
`neuron-monitor-sim --errors`) brings the background errors back, and det then finds them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.sim.workload import BACKGROUND_ERROR_RATES, ERROR_RATE_OPTIONS, error_rates
from neuron_monitor.timeline.recording import RecordingReader

REPO = Path(__file__).resolve().parents[2]
REPORTS = 8  # reports recorded before the run is stopped
DEADLINE = 120.0


def test_no_error_unless_asked() -> None:
    assert error_rates({}) == dict.fromkeys(ERROR_RATE_OPTIONS, 0.0)
    background = error_rates({"errors": True})
    assert {k: v for k, v in background.items() if v} == BACKGROUND_ERROR_RATES
    assert error_rates({"generic_error_rate": 0.5})["generic"] == 0.5
    assert error_rates({"errors": True, "timeout_rate": 0})["timeout"] == 0.0


def test_the_sim_cli_takes_errors() -> None:
    from neuron_monitor.sim.cli import _parser

    assert _parser().parse_args(["--errors"]).errors is True
    assert _parser().parse_args([]).errors is False


def _config(tmp_path: Path) -> Path:
    """configs/monitor.conf (every group) at a 1 s period, so the run needs seconds, not minutes."""
    data = json.loads((REPO / "configs" / "monitor.conf").read_text())
    data["period"] = "1s"
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(data))
    return conf


def _record(args: list[str], rec: Path) -> None:
    """Runs the daemon with ``args`` and ``--record rec`` until REPORTS reports are recorded, then stops it."""
    daemon = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", *args, "--record", str(rec), "--no-imds"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        while not rec.exists() or sum(1 for _ in RecordingReader([rec])) < REPORTS:
            assert daemon.poll() is None, daemon.stderr.read().decode() if daemon.stderr else ""
            assert time.monotonic() < deadline, f"fewer than {REPORTS} reports in {DEADLINE} s"
            time.sleep(0.2)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err.decode()[-2000:]


def _completed(rec: Path) -> int:
    """Executions the recording's runtimes completed (the run did work: a quiet det is not an idle host)."""
    total = 0
    for report in RecordingReader([rec]):
        for rt in report.get("neuron_runtime_data") or []:
            stats = (rt.get("report") or {}).get("execution_stats") or {}
            total += int((stats.get("execution_summary") or {}).get("completed") or 0)
    return total


def _det(rec: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuron_monitor.timeline.det_cli", str(rec)],
        capture_output=True, text=True, timeout=DEADLINE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


@pytest.mark.e2e
def test_det_finds_nothing_on_a_healthy_simulated_run(tmp_path: Path) -> None:
    """What a newcomer runs: `neuron-monitor --simulate trn1.32xlarge -c monitor.conf --record`, then det."""
    rec = tmp_path / "rec.jsonl"
    _record(["-c", str(_config(tmp_path)), "--simulate", "trn1.32xlarge"], rec)
    assert _completed(rec) > 0
    det = _det(rec)
    assert det.returncode == 0, det.stdout[-3000:]
    assert det.stdout == ""


@pytest.mark.e2e
def test_errors_when_asked(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    with TemporarySimulator("trn1.2xlarge", runtimes=1, seed=1, exec_rate=200, errors=True) as sim:
        _record(["-c", str(_config(tmp_path)), "--root", str(sim.root)], rec)
    det = _det(rec)
    assert det.returncode == 1, det.stderr
    assert "generic_error " in det.stdout
