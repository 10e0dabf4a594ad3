"""Benchmark of neuron-monitor-top's per-frame work on a full simulated trn2.48xlarge report (prints, never fails).

A report of a simulated trn2.48xlarge with 16 runtimes (64 logical cores, 128 physical) is collected once through
the same in-process collection `neuron-monitor-top` runs. Then, as medians of repeated runs in this process: the
screen model (`screen_from_report`, through the schema read layer), the layout of each view at 80x24 and 200x60,
and the Rich text a frame becomes, each against the cost of parsing the report line with orjson (the baseline,
measured in the same run), printed as a ratio.

``--live S`` measures the whole view instead: the daemon (`neuron-monitor --simulate SHAPE`, every group at 1 s)
writes its reports into a pipe that `neuron-monitor-top` reads and draws on a 200x60 pseudo-terminal, with the
history and the simulator's varying load; after a warm-up, the CPU seconds each process used over S seconds (from
/proc) are printed with the ratio top/daemon (the issue's bar: at most 1.0). The simulator is a third process,
counted in neither.

    python3 bench/bench_top.py [--repeats 200] [--shape trn2.48xlarge] [--runtimes 16] [--live 30 [--rounds 4]]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.top.layout import Frame, render
from neuron_monitor.top.model import screen_from_report
from neuron_monitor.top.sources import CollectSource, top_plan
from neuron_monitor.top.terminal import RowEncoder, to_text


def one_report(shape: str, runtimes: int) -> bytes:
    args = argparse.Namespace(simulate=shape, no_imds=True, imds_endpoint="http://127.0.0.1:9", imds_timeout=0.1)
    with TemporarySimulator(shape, runtimes=runtimes, seed=1) as sim:
        time.sleep(3.0)  # let the runtimes load and run
        source = CollectSource(args, top_plan(None), str(sim.root))
        try:
            report = asyncio.run(source.once(1.0))
        finally:
            source.close()
    assert report is not None
    return orjson.dumps(report)


DAEMON = (sys.executable, "-m", "neuron_monitor.daemon.cli")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def live_cpu(shape: str, runtimes: int, seconds: float, warmup: float = 10.0) -> tuple[float, float, int]:
    """(daemon CPU s, top CPU s, bytes drawn) over ``seconds`` of the daemon feeding the live view at 1 s."""
    config = {"period": "1s"}  # no group keys: every group (as neuron-monitor-top collects)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps(config))
        daemon = subprocess.Popen(
            [*DAEMON, "-c", str(cfg), "--simulate", shape, "--sim-runtimes", str(runtimes), "--no-imds"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        top = subprocess.Popen(
            [sys.executable, "-m", "neuron_monitor.top.cli", "--stdin"],
            stdin=daemon.stdout,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        drawn = 0

        def drain(until: float) -> None:
            nonlocal drawn
            while time.monotonic() < until:
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    try:
                        drawn += len(os.read(master, 65536))
                    except OSError:
                        return

        try:
            drain(time.monotonic() + warmup)
            d0, t0, drawn = cpu_seconds(daemon.pid), cpu_seconds(top.pid), 0
            drain(time.monotonic() + seconds)
            return cpu_seconds(daemon.pid) - d0, cpu_seconds(top.pid) - t0, drawn
        finally:
            for proc in (top, daemon):
                proc.terminate()
            for proc in (top, daemon):
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            os.close(master)


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--shape", default="trn2.48xlarge")
    p.add_argument("--runtimes", type=int, default=16)
    p.add_argument("--live", type=float, default=0.0, metavar="S", help="measure the live view vs the daemon")
    p.add_argument("--rounds", type=int, default=1, help="--live: rounds to run (the median ratio is printed)")
    a = p.parse_args()
    if a.live:
        ratios = []
        for n in range(max(1, a.rounds)):
            daemon_s, top_s, drawn = live_cpu(a.shape, a.runtimes, a.live)
            ratio = top_s / daemon_s if daemon_s else float("inf")
            ratios.append(ratio)
            load = os.getloadavg()[0]
            what = f"{a.shape}, {a.runtimes} runtimes, 1 s reports, 200x60 pty"
            print(f"{what}, {a.live:.0f} s measured, load average {load:.1f}")
            print(f"daemon (baseline)      {daemon_s:7.2f} CPU s  = {100 * daemon_s / a.live:5.1f} % of a vCPU")
            print(
                f"neuron-monitor-top     {top_s:7.2f} CPU s  = {100 * top_s / a.live:5.1f} % of a vCPU, "
                f"{drawn} bytes drawn"
            )
            print(f"ratio top/daemon       {ratio:7.2f}" + (f"   (round {n + 1})" if a.rounds > 1 else ""))
        if len(ratios) > 1:
            print(f"median ratio top/daemon over {len(ratios)} rounds: {statistics.median(ratios):.2f}")
        return
    line = one_report(a.shape, a.runtimes)
    report = orjson.loads(line)
    screen = screen_from_report(report)
    print(f"{a.shape}, {len(screen.runtimes)} runtimes, {len(screen.cores)} cores, report {len(line)} bytes")
    base = median_seconds(lambda: orjson.loads(line), a.repeats)
    print(f"baseline orjson.loads: {base * 1e3:.3f} ms")
    cases: list[tuple[str, Callable[[], Any]]] = [("screen model", lambda: screen_from_report(report))]
    for w, h in ((80, 24), (200, 60)):
        for view in "dcr":
            cases.append((f"layout {view} {w}x{h}", lambda w=w, h=h, v=view: render(Frame(screen, view=v), w, h)))
    lines = render(Frame(screen, view="d"), 200, 60)
    cases.append(("Rich text 200x60", lambda: to_text(lines)))
    encoder = RowEncoder(Console(force_terminal=True, color_system="standard"))
    cases.append(("terminal rows 200x60", lambda: [encoder.row(line, 200) for line in lines]))
    cases.append(("--once text", lambda: render(Frame(screen), 120, None)))
    for name, fn in cases:
        t = median_seconds(fn, a.repeats)
        print(f"{name:<22} {t * 1e3:8.3f} ms  = {t / base:6.2f} x orjson.loads")


if __name__ == "__main__":
    main()
