"""Benchmark of the timeline tools on a trn2.48xlarge with 16 runtimes (prints figures; never passes or fails).

1. Recorder cost on the daemon's write path: median CPU time of ``Recorder.append`` for one real trn2.48xlarge
   report, against the cost of encoding that report (orjson, the daemon's own step) measured in this process.
2. A 24-hour recording at 1 s (86,400 reports) built from that real report: per-core utilization, flops,
   executions, latency and vCPU vary every second, tensor memory every 5 minutes, a numerical-error burst every
   hour and one uncorrected ECC; written with the Recorder (rotation at 256 MiB).
3. ``neuron-monitor-trace`` (every sample, and ``--resolution 60``) and ``neuron-monitor-det`` on it as child
   processes: wall time, CPU time and peak RSS from the OS (wait4), reports per second, trace size; against a
   baseline child that only reads and parses the recording (gzip + JSON), measured on the same machine.

The real report comes from the daemon on the simulator (``neuron-monitor --simulate trn2.48xlarge``).

    python3 bench/bench_trace.py [--hours 24] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.daemon_run import aws_groups_config, daemon_report_line  # noqa: E402
from bench.inprocess import cpu_ms  # noqa: E402
from neuron_monitor.timeline.recording import Recorder  # noqa: E402

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def real_report() -> dict[str, Any]:
    """The third report of the daemon on a simulated trn2.48xlarge with 16 runtimes, every group at 1 s."""
    args = ["--simulate", "trn2.48xlarge", "--sim-runtimes", "16", "--no-imds"]
    rep = orjson.loads(daemon_report_line(aws_groups_config("1s"), args))
    assert len(rep["neuron_runtime_data"]) == 16, "expected 16 runtimes"
    return rep


def bench_recorder(line: bytes, rounds: int = 7, per_round: int = 300) -> tuple[float, float]:
    """(median µs per append, median µs per orjson encode of the same report)."""
    rep = orjson.loads(line)
    appends, encodes = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(rounds):
            with Recorder(Path(d) / "r.gz", max_bytes=1 << 40) as r:
                appends.append(cpu_ms(lambda r=r: [r.append(line) for _ in range(per_round)]) / per_round)
            encodes.append(
                cpu_ms(lambda: [orjson.dumps(rep, option=orjson.OPT_APPEND_NEWLINE) for _ in range(per_round)])
                / per_round
            )
    return statistics.median(appends) * 1e3, statistics.median(encodes) * 1e3


def vary(rep: dict[str, Any], i: int, rng: random.Random, bursts: dict[int, int], ecc_at: int) -> bytes:
    """Report ``i`` of the day: the real report with this second's values."""
    rep["report_time"] = round(T0 + i, 6)
    for n, rt in enumerate(rep["neuron_runtime_data"]):
        groups = rt["report"]
        base = 20 + 4 * n
        for core in groups["neuroncore_counters"].get("neuroncores_in_use", {}).values():
            core["neuroncore_utilization"] = round(base + rng.uniform(-5, 5), 2)
            if "flops" in core:
                core["flops"] = int(core["neuroncore_utilization"] * 1e11)
        ex = groups["execution_stats"]
        if "execution_summary" in ex:
            ex["execution_summary"]["completed"] = 40 + rng.randrange(20)
            ex["error_summary"]["numerical"] = 3 if bursts.get(i, -1) == n else 0
            for lat in (ex["latency_stats"].get("total_latency"), ex["latency_stats"].get("device_latency")):
                if lat:
                    lat["p50"] = 0.002 + rng.random() * 1e-4
                    lat["p99"] = 0.004 + rng.random() * 1e-4
        cpu = groups["neuron_runtime_vcpu_usage"].get("vcpu_usage")
        if cpu:
            cpu["user"] = round(rng.uniform(5, 15), 2)
        mem = groups["memory_used"].get("neuron_runtime_used_bytes", {}).get("usage_breakdown", {})
        if i % 300 == 0 and n == (i // 300) % 16:
            for cats in mem.get("neuroncore_memory_usage", {}).values():
                cats["tensors"] = 4096 * rng.randrange(1, 4096)
    avg = rep["system_data"]["vcpu_usage"].get("average_usage")
    if avg:
        avg["user"] = round(rng.uniform(10, 30), 2)
    for dev in rep["system_data"]["neuron_hw_counters"].get("neuron_devices", []):
        dev["mem_ecc_uncorrected"] = 1 if i == ecc_at and dev["neuron_device_index"] == 7 else 0
    return orjson.dumps(rep, option=orjson.OPT_APPEND_NEWLINE)


def write_recording(path: Path, template: dict[str, Any], reports: int) -> tuple[float, int]:
    rng = random.Random(7)
    bursts = {h * 3600 + 1800: h % 16 for h in range(reports // 3600 + 1)}
    rep = orjson.loads(orjson.dumps(template))
    t = time.monotonic()
    raw = 0
    with Recorder(path, max_bytes=256 << 20, keep=1000) as r:
        for i in range(reports):
            line = vary(rep, i, rng, bursts, ecc_at=reports // 2)
            raw += len(line)
            r.append(line)
    return time.monotonic() - t, raw


BASELINE = """
import sys
from neuron_monitor.timeline.recording import iter_recording
n = sum(1 for _ in iter_recording(sys.argv[1:]))
print(n, file=sys.stderr)
"""


def child(cmd: list[str]) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of a child process, from wait4."""
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    assert p.stderr is not None
    err = p.stderr.read().decode()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cmd[2]} failed: {err}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss // 1024, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=24.0, help="recording length at 1 s (default 24)")
    ap.add_argument("--keep", metavar="DIR", help="keep the recording and traces in DIR")
    args = ap.parse_args()
    reports = int(args.hours * 3600)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {os.uname().machine}")
    try:
        template = real_report()
        line = orjson.dumps(template, option=orjson.OPT_APPEND_NEWLINE)
        cores = sum(len(rt["report"]["neuroncore_counters"].get("neuroncores_in_use", {}))
                    for rt in template["neuron_runtime_data"])  # fmt: skip
        print(f"report: trn2.48xlarge, 16 runtimes, {cores} NeuronCores in use, {len(line)} bytes of JSON")
        append_us, encode_us = bench_recorder(line)
        print(f"Recorder.append: {append_us:.0f} µs CPU per report (median of 7 x 300); "
              f"orjson encode of the same report {encode_us:.0f} µs; ratio {append_us / encode_us:.1f}x")  # fmt: skip

        rec = work / "day.gz"
        secs, raw = write_recording(rec, template, reports)
        size = sum(f.stat().st_size for f in work.glob("day.gz*"))
        print(f"recording: {reports} reports, {raw / 2**20:.0f} MiB of JSON -> {size / 2**20:.0f} MiB on disk "
              f"({raw / size:.1f}x), {len(list(work.glob('day.gz*')))} files, built in {secs:.0f} s")  # fmt: skip

        py = sys.executable
        base = child([py, "-c", BASELINE, str(rec)])
        print(f"baseline (read + parse only): {base[0]:.1f} s wall, {base[1]:.1f} s CPU, "
              f"{reports / base[1]:.0f} reports/s, peak RSS {base[2]} MiB")  # fmt: skip
        trace = work / "trace.json"
        trace_cmd = [py, "-m", "neuron_monitor.timeline.trace_cli", str(rec), "-o", str(trace)]
        for name, cmd in (
            ("neuron-monitor-trace", trace_cmd),
            ("neuron-monitor-trace --resolution 60", [*trace_cmd, "--resolution", "60"]),
            ("neuron-monitor-det", [py, "-m", "neuron_monitor.timeline.det_cli", str(rec)]),
        ):
            wall, cpu, rss, _ = child(cmd)
            extra = f", trace {trace.stat().st_size / 2**20:.1f} MiB" if "trace" in name else ""
            print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU, {reports / cpu:.0f} reports/s, "
                  f"peak RSS {rss} MiB, {cpu / base[1]:.1f}x the baseline CPU{extra}")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
