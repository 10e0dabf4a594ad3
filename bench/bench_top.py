"""Benchmark of neuron-monitor-top's per-frame work on a full simulated trn2.48xlarge report (prints, never fails).

A report of a simulated trn2.48xlarge with 16 runtimes (64 logical cores, 128 physical) is collected once through
the same in-process collection `neuron-monitor-top` runs. Then, as medians of repeated runs in this process: the
screen model (`screen_from_report`, through the schema read layer), the layout of each view at 80x24 and 200x60,
and the Rich text a frame becomes, each against the cost of parsing the report line with orjson (the baseline,
measured in the same run), printed as a ratio.

    python3 bench/bench_top.py [--repeats 200] [--shape trn2.48xlarge] [--runtimes 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.top.layout import Frame, render
from neuron_monitor.top.model import screen_from_report
from neuron_monitor.top.sources import CollectSource, top_plan
from neuron_monitor.top.terminal import to_text


def one_report(shape: str, runtimes: int) -> bytes:
    args = argparse.Namespace(no_imds=True, imds_endpoint="http://127.0.0.1:9", imds_timeout=0.1)
    with TemporarySimulator(shape, runtimes=runtimes, seed=1) as sim:
        time.sleep(3.0)  # let the runtimes load and run
        source = CollectSource(args, top_plan(None), str(sim.root))
        try:
            report = asyncio.run(source.once(1.0))
        finally:
            source.close()
    assert report is not None
    return orjson.dumps(report)


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
    a = p.parse_args()
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
    cases.append(("--once text", lambda: render(Frame(screen), 120, None)))
    for name, fn in cases:
        t = median_seconds(fn, a.repeats)
        print(f"{name:<22} {t * 1e3:8.3f} ms  = {t / base:6.2f} x orjson.loads")


if __name__ == "__main__":
    main()
