"""Signals and reloads against the running daemon: SIGHUP storms, a configuration replaced by a FIFO, SIGTERM.

Before (issue 20): each reload pushed every group's next collection a full period back (SIGHUP every 1.5 s at a
2 s period: 0 reports for 12 s; a storm: none for 6.7 s at 1 s) and nothing counted it; a FIFO swapped in as the
configuration blocked the reload thread, after which SIGTERM no longer stopped the daemon (alive 20 s later).
After: a reload keeps every due time (storms coalesce into few reloads, an unchanged file changes nothing), a FIFO
is one error line and the old plan, and SIGTERM ends the daemon. Conditions are awaited with generous deadlines;
no count is taken in a fixed window and no wall time is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from neuron_monitor.daemon.scheduler import _Unit, keep_due

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
CONF = {"period": "1s", "system_metrics": [{"type": "memory_info"}]}


class Running:
    """The daemon as a process, its report lines gathered by a thread."""

    def __init__(self, conf: Path, *extra: str) -> None:
        cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--no-imds", "-c", str(conf), *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        self.reports: list[dict[str, Any]] = []
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.reports.append(json.loads(line))

    def wait_reports(self, n: int, while_waiting: Any = None) -> None:
        deadline = time.monotonic() + DEADLINE
        while len(self.reports) < n:
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline, f"only {len(self.reports)} of {n} reports"
            if while_waiting is not None:
                while_waiting()
            time.sleep(0.05)

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)
        return self.proc.stderr.read().decode(errors="replace")

    def term(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(DEADLINE)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_a_reload_keeps_due_times() -> None:
    old = _Unit("memory_info", 1.0, None, next_due=100.4, last=99.4)
    same = _Unit("memory_info", 1.0, None)
    keep_due(same, old, now=100.3)
    assert (same.next_due, same.last) == (100.4, 99.4)  # unchanged period: the same grid
    faster = _Unit("memory_info", 0.5, None)
    keep_due(faster, old, now=100.3)
    assert faster.next_due == 100.3  # due 0.5 s after its last collection: at once, not one period later
    slower = _Unit("memory_info", 2.0, None)
    keep_due(slower, old, now=100.3)
    assert slower.next_due == 101.4
    new = _Unit("vcpu_usage", 1.0, None)
    keep_due(new, None, now=100.3)
    assert new.next_due == 101.3


def test_sighup_every_half_period_never_stops_reports(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(CONF))
    d = Running(conf, "--verbose", "3")
    try:
        d.wait_reports(1)
        last_hup = [0.0]

        def hup() -> None:  # a SIGHUP every 0.5 s (half the period) for as long as we wait
            if time.monotonic() - last_hup[0] >= 0.5:
                d.proc.send_signal(signal.SIGHUP)
                last_hup[0] = time.monotonic()

        start = len(d.reports)
        d.wait_reports(start + 6, while_waiting=hup)  # before the fix: no report ever arrived under this storm
        assert d.term() == 0
        err = d.stderr()
        assert "configuration unchanged" in err  # the storm was served, with nothing to apply
        late = d.reports[-1]["neuron_monitor"]
        assert "late_collections" in late and "skipped_collections" in late
    finally:
        d.close()


def test_a_burst_of_sighups_makes_few_reloads(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(CONF))
    d = Running(conf, "--verbose", "3")
    try:
        d.wait_reports(1)
        for _ in range(50):
            d.proc.send_signal(signal.SIGHUP)
        conf.write_text(json.dumps({**CONF, "period": "500ms"}))
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + DEADLINE
        while not any(r["system_data"]["memory_info"]["period"] < 0.8 for r in d.reports[-3:]):  # 500ms applied
            assert time.monotonic() < deadline and d.proc.poll() is None
            time.sleep(0.1)
        assert d.term() == 0
        err = d.stderr()
        reloads = err.count("configuration reloaded") + err.count("configuration unchanged")
        assert 1 <= reloads < 25, err[-3000:]  # 51 signals, coalesced
    finally:
        d.close()


def test_config_replaced_by_a_fifo_keeps_the_plan_and_sigterm_still_works(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(CONF))
    d = Running(conf, "--verbose", "2")
    try:
        d.wait_reports(1)
        conf.unlink()
        os.mkfifo(conf)
        d.proc.send_signal(signal.SIGHUP)
        n = len(d.reports)
        d.wait_reports(n + 3)  # reports go on with the kept plan
        assert set(d.reports[-1]["system_data"]) == {"memory_info"}
        assert d.term() == 0  # before the fix: still alive 20 s later
        err = d.stderr()
        assert "keeping the previous configuration" in err and "is a FIFO" in err
        assert "Traceback" not in err
    finally:
        d.close()


def test_sigterm_during_reload_storm_exits_0(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "10ms", "system_metrics": [{"type": "memory_info"}]}))
    d = Running(conf)
    try:
        d.wait_reports(3)
        for _ in range(20):
            d.proc.send_signal(signal.SIGHUP)
        assert d.term() == 0
        assert "Traceback" not in d.stderr()
    finally:
        d.close()
