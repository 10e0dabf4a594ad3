"""End to end: the real daemon against a running simulator, held to the simulator's ground truth.

Mixed periods (execution_stats 0.5 s, neuroncore_counters 1 s, neuron_hw_counters 0.7 s), a tag filter, injected
faults, a runtime that exits mid-run; then every runtime pauses so the totals are final. Executions, errors and
ECC events must add up exactly over the fresh group objects, mean utilization within 1 percentage point, memory
exact.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.sim.temporary import TemporarySimulator

REPO = Path(__file__).resolve().parents[2]
UTILIZATION = 0.4
Report = dict[str, Any]


def _conf(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "period": "500ms",
                "neuron_runtimes": [
                    {
                        "tag_filter": "^job-",
                        "metrics": [
                            {"type": "execution_stats"},
                            {"type": "neuroncore_counters", "period": "1s"},
                            {"type": "memory_used"},
                        ],
                    }
                ],
                "system_metrics": [{"type": "neuron_hw_counters", "period": "700ms"}],
            }
        )
    )
    return path


class Daemon:
    def __init__(self, conf: Path, root: Path) -> None:
        cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--root", str(root), "--no-imds"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        self.reports: list[dict[str, Any]] = []
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():  # the resync newline before the first report is empty
                self.reports.append(json.loads(line))

    def wait_reports(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        target = len(self.reports) + n
        while len(self.reports) < target:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "daemon produced too few reports"
            time.sleep(0.05)

    def wait_collected_after(self, wall: float, done: Callable[[list[Report]], bool], timeout: float = 60.0) -> None:
        """Wait until ``done`` holds for the reports collected wholly after wall-clock time ``wall``: those after
        the first report built after it (collections are sequential, so the next one starts after that report)."""
        deadline = time.monotonic() + timeout
        while True:
            after = list(itertools.dropwhile(lambda r: r["report_time"] <= wall, self.reports))[1:]
            if done(after):
                return
            assert self.proc.poll() is None, self.proc.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"no report collected after the pause showed everything in {timeout} s"
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._t.join(5)


def _both_jobs_seen(reports: list[Report]) -> bool:
    return any({e["neuron_runtime_tag"] for e in r["neuron_runtime_data"]} == {"job-00", "job-01"} for r in reports)


def _final(after_pause: list[dict[str, Any]]) -> bool:
    """Every group of job-00 and neuron_hw_counters collected fresh, and job-01 (stopped) gone from the report."""
    if not after_pause or any(e["neuron_runtime_tag"] == "job-01" for e in after_pause[-1]["neuron_runtime_data"]):
        return False
    fresh: set[str] = set()
    if any(r["system_data"].get("neuron_hw_counters", {}).get("fresh") for r in after_pause):
        fresh.add("neuron_hw_counters")
    for r in after_pause:
        for e in r["neuron_runtime_data"]:
            if e["neuron_runtime_tag"] == "job-00":
                fresh |= {g for g, body in e["report"].items() if isinstance(body, dict) and body.get("fresh")}
    return fresh >= {"neuron_hw_counters", "execution_stats", "neuroncore_counters", "memory_used"}


@pytest.mark.e2e
def test_daemon_counts_match_ground_truth(tmp_path: Path) -> None:
    options = dict(
        tags=["job-00", "job-01", "other"], utilization=UTILIZATION, exec_rate=150.0, step=0.01, load_time=1.5,
        memory_interval=0, ecc_rate=0, numerical_error_rate=0.01, generic_error_rate=0.01,
    )  # fmt: skip
    with TemporarySimulator("inf2.24xlarge", runtimes=3, seed=11, **options) as sim:
        # paused while the daemon starts (however long a loaded host takes): it sees both jobs first, so its
        # baselines are the totals below and every later execution is in its reports
        sim.pause()
        daemon = Daemon(_conf(tmp_path / "monitor.conf"), sim.root)
        try:
            daemon.wait_collected_after(0.0, _both_jobs_seen)
            before = {tag: sim.truth.runtime_totals(tag)[0]["counters"] for tag in ("job-00", "job-01")}
            sim.resume()
            daemon.wait_reports(5)
            sim.inject("numerical_burst", tag="job-00", count=37)
            sim.inject("timeouts", tag="job-01", count=5)
            sim.inject("failed_to_queue_burst", tag="job-00", count=9)
            sim.inject("ecc_uncorrected", device=0, count=3)
            sim.inject("ecc_corrected", device=0, count=2, memory="sram")
            daemon.wait_reports(3)
            sim.stop_runtime("job-01")
            daemon.wait_reports(4)
            sim.pause()
            paused = time.time()
            daemon.wait_collected_after(paused, _final)  # every group collected once the totals were final
        finally:
            daemon.stop()
        truth = sim.truth
        pids = {tag: sim.pid_of(tag) for tag in ("job-00", "job-01", "other")}
        totals = {tag: truth.runtime_totals(tag)[0] for tag in pids}
        ecc = truth.latest_totals()["ecc"]["0"]
        faults = truth.events("fault")
        resumed = next(e["t"] for e in faults if e["kind"] == "resume")
        steady_from = max(truth.runtime("job-00")["t"] + 1.5, resumed) + 0.1  # after loading and the resume
        steady_to = next(e["t"] for e in faults if e["kind"] == "pause" and e["t"] > resumed) - 0.05

    reports = daemon.reports
    seen_tags = {e["neuron_runtime_tag"] for r in reports for e in r["neuron_runtime_data"]}
    assert seen_tags == {"job-00", "job-01"}  # "other" is filtered out by tag_filter

    sums: dict[str, dict[str, int]] = {tag: {} for tag in ("job-00", "job-01")}
    util: dict[str, list[tuple[float, float]]] = {"job-00": []}  # (utilization, period)
    for r in reports:
        for e in r["neuron_runtime_data"]:
            es = e["report"].get("execution_stats")
            if es and es["fresh"]:
                acc = sums[e["neuron_runtime_tag"]]
                for section in ("execution_summary", "error_summary"):
                    for k, v in es[section].items():
                        acc[k] = acc.get(k, 0) + v
            nc = e["report"].get("neuroncore_counters")
            if not (nc and nc["fresh"] and e["neuron_runtime_tag"] == "job-00"):
                continue
            if steady_from <= r["report_time"] - nc["period"] and r["report_time"] <= steady_to:
                util["job-00"].extend(
                    (c["neuroncore_utilization"], nc["period"]) for c in nc["neuroncores_in_use"].values()
                )
    done = {tag: {k: v - before[tag].get(k, 0) for k, v in totals[tag]["counters"].items()} for tag in sums}
    for tag in ("job-00", "job-01"):
        assert {k: v for k, v in sums[tag].items() if v} == {k: v for k, v in done[tag].items() if v}, tag
    assert done["job-00"]["numerical"] >= 37 and done["job-00"]["completed"] > 300
    assert done["job-01"]["timed_out"] >= 5

    # utilization: reports while job-00 ran steadily (after loading, before the pause) are within 1 point
    # A simulator starved by a loaded host adds a stall's busy time in one step, so one window can be off while the
    # next makes up for it: their time-weighted mean is exact, each window is only a valid share.
    steady = util["job-00"]
    assert len(steady) >= 4
    mean = sum(u * p for u, p in steady) / sum(p for _, p in steady)
    assert abs(mean - 100 * UTILIZATION) <= 1.0, steady
    assert all(0.0 <= u <= 100.0 for u, _ in steady), steady

    hw = [r["system_data"]["neuron_hw_counters"] for r in reports if "neuron_hw_counters" in r["system_data"]]
    fresh_hw = [h for h in hw if h["fresh"]]
    for name in ("mem_ecc_uncorrected", "sram_ecc_corrected"):
        assert sum(h["neuron_devices"][0][name] for h in fresh_hw) == ecc[name] > 0

    last_memory = [e["report"]["memory_used"] for r in reports for e in r["neuron_runtime_data"]
                   if e["neuron_runtime_tag"] == "job-00" and "memory_used" in e["report"]][-1]  # fmt: skip
    used = last_memory["neuron_runtime_used_bytes"]
    assert used["usage_breakdown"]["host"] == totals["job-00"]["host_mem"]
    assert used["neuron_device"] == sum(sum(m.values()) for m in totals["job-00"]["core_mem"].values())
    # job-01 exited: its final counts were reported, then it left the report
    assert all(e["neuron_runtime_tag"] != "job-01" for e in reports[-1]["neuron_runtime_data"])
    assert pids["job-01"] not in {e["pid"] for e in reports[-1]["neuron_runtime_data"]}
