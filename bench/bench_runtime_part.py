"""Benchmark: what the report's runtime part costs the daemon beyond its reads, and so the most that writing it as
bytes in the compiled helper could save (issue 41 goal 3; prints, never fails).

    python3 bench/bench_runtime_part.py [--shape trn2.48xlarge] [--runtimes 16] [--collections 240]

One `Collector` (the daemon's, AWS's seven groups at 0.1 s, on the simulator) collects every 0.1 s in this process;
the collections take turns between three variants, and this thread's CPU for each (collection, report and encoding;
not the event loop's turn or the write, which the daemon adds to every variant alike) is printed as the median:

- ``full``: the collection as the daemon makes it;
- ``no runtime groups``: the system groups, the application snapshot (device listing, application lists, block
  reads and parses) and a read of each application's ``/proc/PID/stat``, but none of the four runtime groups and no
  runtime group object: the report's runtime part is the previous full report's, spliced as ready bytes (an orjson
  ``Fragment``). This is a compiled writer that makes the runtime part from the parsed readings at no cost;
- ``reads only``: the same without the block parses (the listing, the block reads and the preads): a writer that
  works from the raw blocks at no cost.

Then the number formatting such a writer needs: the runtime part's floats and integers formatted by CPython's own
shortest-repr code (``float.__repr__``, ``PyOS_double_to_string``: the only one the limited API offers) against
orjson formatting the same numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.daemon_run import aws_groups_config  # noqa: E402
from neuron_monitor.daemon import report as rpt  # noqa: E402
from neuron_monitor.daemon.config import plan_from_data  # noqa: E402
from neuron_monitor.daemon.scheduler import Collector  # noqa: E402
from neuron_monitor.host.rootfs import RootFS  # noqa: E402
from neuron_monitor.neuron.backend import open_backend  # noqa: E402
from neuron_monitor.sim.temporary import TemporarySimulator  # noqa: E402

VARIANTS = ("full", "no runtime groups", "reads only")


def numbers(value: Any, floats: list[float], ints: list[int]) -> None:
    """The floats and (non-bool) integers of a decoded JSON value, appended."""
    if isinstance(value, dict):
        for v in value.values():
            numbers(v, floats, ints)
    elif isinstance(value, list):
        for v in value:
            numbers(v, floats, ints)
    elif isinstance(value, float):
        floats.append(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        ints.append(value)


def per_item_ns(fn: Any, items: list[Any], repeat: int = 200) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        fn(items)
    return (time.perf_counter() - t) / repeat / max(1, len(items)) * 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="trn2.48xlarge")
    ap.add_argument("--runtimes", type=int, default=16)
    ap.add_argument("--collections", type=int, default=240, help="collections in all (a third per variant)")
    args = ap.parse_args()
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with TemporarySimulator(args.shape, runtimes=args.runtimes, seed=1, load_time=0.0) as sim:
        time.sleep(0.5)
        root = RootFS(str(sim.root))
        backend = open_backend(root)
        plan = plan_from_data(aws_groups_config("100ms"), "bench")
        c = Collector(root, plan, backend.apps, backend.hardware_info, lambda: rpt.empty_instance_info(""))
        c.prime()
        system_units = [u for u in c.units if u.scope_index is None]
        vcpu: Any = c.groups.runtime[0]["neuron_runtime_vcpu_usage"]
        source: Any = c.app_source
        ready: orjson.Fragment | None = None
        runtime_part: Any = None
        for i in range(args.collections + 6):
            time.sleep(0.1)
            variant = VARIANTS[i % 3] if ready is not None else "full"
            t0 = time.thread_time()
            if variant == "full":
                c.collect_on_loop(c.units)
                report = c.build_report()
                rpt.encode(report)
                c.retire_gone()
            else:
                c.collect_on_loop(system_units)
                root.begin_collection(c.clock())
                if variant == "reads only":
                    for dev in source._devices.values():
                        dev.list_apps()
                    for _, slot in source._steady.blocks:
                        slot.block.read()
                else:
                    source.snapshot()
                for base in vcpu._base.values():
                    base.file.read()
                root.end_collection()
                report = c.build_report()
                report["neuron_runtime_data"] = ready
                rpt.encode(report)
            took = time.thread_time() - t0
            if variant == "full":
                runtime_part = report["neuron_runtime_data"]
                ready = orjson.Fragment(orjson.dumps(runtime_part))
            if i >= 6:
                cpu[variant].append(took * 1000)
    med = {v: statistics.median(xs) for v, xs in cpu.items()}
    print(f"{args.shape}, {args.runtimes} runtimes, {args.collections} collections 0.1 s apart, load average "
          f"{os.getloadavg()[0]:.1f}; thread CPU per collection, report and encoding (median):")  # fmt: skip
    for v in VARIANTS:
        print(f"  {v:18} {med[v]:.3f} ms  ({med[v] / med['full']:.3f} x full)")
    floats: list[float] = []
    ints: list[int] = []
    numbers(orjson.loads(orjson.dumps(runtime_part)), floats, ints)
    dtoa = per_item_ns(lambda xs: list(map(float.__repr__, xs)), floats)
    fast = per_item_ns(orjson.dumps, floats)
    print(f"the runtime part: {len(orjson.dumps(runtime_part))} bytes, {len(floats)} floats, {len(ints)} integers; "
          f"per float: CPython's repr {dtoa:.0f} ns, orjson {fast:.0f} ns (warm); per integer: repr "
          f"{per_item_ns(lambda xs: list(map(int.__repr__, xs)), ints):.0f} ns, orjson "
          f"{per_item_ns(orjson.dumps, ints):.0f} ns")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
