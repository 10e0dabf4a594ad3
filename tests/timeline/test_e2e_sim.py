"""End to end: simulator with injected faults -> real daemon with --record (rotating) -> neuron-monitor-det finds
every injected fault and nothing else; neuron-monitor-trace turns the same recording into valid traces."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.timeline.detect import parse_details
from neuron_monitor.timeline.recording import RecordingReader, recording_files
from neuron_monitor.timeline.trace import GROUP_BY

from . import tef

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(?P<kind>\w+) (?P<subject>NC [0-9,-]+|ND \d+) @ [0-9:]+ - [0-9:]+: (?P<details>.*)$")
QUIET = dict(generic_error_rate=0, numerical_error_rate=0, timeout_rate=0, failed_to_queue_rate=0,
             hardware_error_rate=0, ecc_rate=0)  # fmt: skip
HANG_PERIODS = 4
PERIOD = 0.5


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def reports_in(rec: Path) -> int:
    return sum(1 for _ in RecordingReader([rec]))


def wait_reports(rec: Path, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while reports_in(rec) < n:  # reads the live, rotating recording while the daemon writes it
        assert time.monotonic() < deadline, f"fewer than {n} reports recorded in {timeout} s"
        time.sleep(0.1)


def cores_of(start: dict[str, Any], ready: dict[str, Any]) -> str:
    """The global logical NeuronCores of a runtime from the simulator's {device: [physical cores]}."""
    per_device, lnc = ready["logical_cores"], ready["lnc"]
    cores = sorted({int(d) * per_device + c // lnc for d, cs in start["cores"].items() for c in cs})
    assert cores == list(range(cores[0], cores[-1] + 1))
    return f"NC {cores[0]}-{cores[-1]}"


@pytest.mark.e2e
def test_det_finds_every_injected_fault_and_nothing_else(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    runtime_groups = ["neuroncore_counters", "memory_used", "execution_stats", "neuron_runtime_vcpu_usage"]
    conf.write_text(json.dumps({
        "period": f"{PERIOD}s",
        "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": t} for t in runtime_groups]}],
        "system_metrics": [{"type": t} for t in ("vcpu_usage", "memory_info", "neuron_hw_counters",
                                                  "neuron_device_telemetry")],
    }))  # fmt: skip
    rec = tmp_path / "rec.gz"
    with TemporarySimulator("trn1.32xlarge", runtimes=6, seed=3, **QUIET) as sim:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--root", str(sim.root),
             "--record", str(rec), "--record-max-bytes", "8000", "--record-keep", "50"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env(), cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_reports(rec, 4)
            sim.inject("numerical_burst", tag="job-00", count=7)
            sim.inject("hardware_error", tag="job-01", count=3)
            sim.inject("timeouts", tag="job-02", count=2)
            sim.inject("failed_to_queue_burst", tag="job-03", count=40)
            sim.inject("ecc_uncorrected", device=5, count=1, memory="sram")
            sim.inject("ecc_repairable", device=3, count=2)
            sim.inject("unhealthy", device=7, component="link_efa")
            sim.hang_runtime("job-04")
            seen = reports_in(rec)
            wait_reports(rec, seen + 2)
            sim.stop_runtime("job-05")
            sim.inject("healthy", device=7)
            wait_reports(rec, seen + HANG_PERIODS + 6)
        finally:
            daemon.terminate()
            _, err = daemon.communicate(timeout=30)
        assert daemon.returncode == 0, err.decode()
        starts = {s["tag"]: s for s in sim.truth.runtimes()}
        faults = {(f.get("tag"), f["kind"]): f for f in sim.truth.events("fault")}
        ready = sim.truth.ready()

    assert len(recording_files(rec)) > 2  # the daemon rotated the recording on the way
    p = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.timeline.det_cli", str(rec), "--hang-periods", str(HANG_PERIODS),
         "-o", str(tmp_path / "det.json")],
        capture_output=True, text=True, env=env(), timeout=120,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    found = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        assert m, line
        details = parse_details(m["details"])
        who = details.get("runtime_tag", m["subject"])
        assert (m["kind"], who) not in found, f"reported twice: {line}"
        found[(m["kind"], who)] = (m["subject"], details)

    expected = {
        ("numerical_error", "job-00"): 7,
        ("hardware_error", "job-01"): 3,
        ("timed_out", "job-02"): 2,
        ("failed_to_queue", "job-03"): 40,
        ("ecc_uncorrected", "ND 5"): 1,
        ("ecc_repairable_uncorrected", "ND 3"): 2,
        ("device_unhealthy", "ND 7"): None,
        ("hang_suspected", "job-04"): None,
        ("runtime_vanished", "job-05"): None,
    }
    assert set(found) == set(expected), p.stdout
    for (kind, who), count in expected.items():
        subject, details = found[(kind, who)]
        if count is not None:
            assert details["count"] == count, (kind, details)
        if who.startswith("job-"):
            assert subject == cores_of(starts[who], ready)
            assert details["pid"] == starts[who]["pid"]
    assert found[("ecc_uncorrected", "ND 5")][1]["sram_ecc_uncorrected"] == 1
    assert found[("device_unhealthy", "ND 7")][1]["components"] == "link_efa"
    assert "ongoing" not in found[("device_unhealthy", "ND 7")][1]  # it cleared
    assert found[("hang_suspected", "job-04")][1]["periods"] >= HANG_PERIODS
    assert ("job-04", "hang_runtime") in faults

    # the same recording, as traces: valid in every grouping; the det trace marks the nine problems
    events = tef.check_trace(tmp_path / "det.json")
    threads = tef.thread_names(events)
    assert sum(1 for name in threads.values() if name.startswith("problem: ")) == 9
    for group_by in GROUP_BY:
        out = tmp_path / f"trace-{group_by}.json"
        t = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.timeline.trace_cli", str(rec), "-o", str(out), "--group-by",
             group_by],
            capture_output=True, text=True, env=env(), timeout=120,
        )  # fmt: skip
        assert t.returncode == 0, t.stderr
        events = tef.check_trace(out)
        counters = tef.counters(events)
        assert any(k.endswith("utilization") for k in counters) and any("memory" in k for k in counters)
