"""Run the daemon as a subprocess and measure it from the OS: CPU time (the scheduler's per-thread run time from
/proc/PID/task/*/schedstat) between its first and last report, and peak RSS (VmHWM from /proc/PID/status); or take
one of its report lines as a benchmark's input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.inprocess import cpu_ms

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
# AWS's seven groups: four per runtime, three for the host
RUNTIME_GROUPS = ("neuroncore_counters", "execution_stats", "memory_used", "neuron_runtime_vcpu_usage")
SYSTEM_GROUPS = ("vcpu_usage", "memory_info", "neuron_hw_counters")


def aws_groups_config(period: str, extra_system: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """A daemon config: AWS's seven groups every ``period`` (the runtime groups for every runtime tag), then the
    system groups of ``extra_system``."""
    return {
        "period": period,
        "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": t} for t in RUNTIME_GROUPS]}],
        "system_metrics": [*({"type": t} for t in SYSTEM_GROUPS), *extra_system],
    }


def write_config(config: dict[str, Any]) -> Path:
    """``config`` in a new temporary file (the caller removes it)."""
    fd, name = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    return Path(name)


@dataclass
class RunFigures:
    reports: int
    cpu_s: float
    wall_s: float
    peak_rss_mib: float

    @property
    def cpu_ms_per_report(self) -> float:
        return self.cpu_s * 1000 / self.reports


def _cpu_s(pid: int) -> float:
    """CPU time of the process so far. The sum of its threads' ``schedstat`` run times (nanoseconds: the
    scheduler's own accounting, what utime + stime are scaled from) when the kernel has it; /proc/PID/stat's
    utime + stime otherwise (clock ticks: 10 ms steps, too coarse for a few dozen reports of 3 ms). The daemon's
    threads all live as long as it does, so no thread's time is lost from the sum."""
    try:
        return (
            sum(int((task / "schedstat").read_bytes().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9
        )
    except (OSError, ValueError, IndexError):
        data = Path(f"/proc/{pid}/stat").read_bytes()
        rest = data[data.rfind(b")") + 2 :].split()
        return (int(rest[11]) + int(rest[12])) / TICKS


def _hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def speed_reference() -> float:
    """Milliseconds of CPU for ``sum(range(10**7))`` in this process, best of 3: printed beside the figures, so
    that runs on a shared VM whose speed drifts (by a third within an hour on the development VM) can be told apart
    from changes in the code."""
    return min(cpu_ms(lambda: sum(range(10**7))) for _ in range(3))


def daemon_report_line(config: dict[str, Any], args: list[str], nth: int = 3) -> bytes:
    """The ``nth`` report line (the third by default: the first with every rate and latency filled in) of the daemon
    run with ``config`` (written to a temporary file) and ``args``; the daemon is stopped after it."""
    conf = write_config(config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    try:
        lines: list[bytes] = []
        while len(lines) < nth:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("daemon stopped early")
            if line != b"\n":  # the resync newline before the first report
                lines.append(line)
    finally:
        proc.terminate()
        proc.wait(30)
        conf.unlink()
    return lines[-1]


def run_daemon(args: list[str], reports: int) -> RunFigures:
    """Start the daemon, skip its first report (start-up), count CPU over the next ``reports`` reports."""
    return run_command([sys.executable, "-m", "neuron_monitor.daemon.cli", *args], reports)


def run_command(cmd: list[str], reports: int, tree: Path = REPO) -> RunFigures:
    """Start ``cmd`` (a process writing one line per report to stdout) with the package imported from ``tree``
    (this checkout unless told), skip its first line (start-up), count CPU over the next ``reports`` lines."""
    import time

    proc = subprocess.Popen(
        cmd,
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
        if first == b"\n":  # the resync newline before the first report
            first = proc.stdout.readline()
        if not first:
            raise RuntimeError("daemon produced no report")
        cpu0, t0 = _cpu_s(proc.pid), time.monotonic()
        for _ in range(reports):
            if not proc.stdout.readline():
                raise RuntimeError("daemon stopped early")
        cpu1, t1 = _cpu_s(proc.pid), time.monotonic()
        hwm = _hwm_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return RunFigures(reports, cpu1 - cpu0, t1 - t0, hwm)
