"""Benchmark: the ``efa_counters`` group on a simulated host's EFA tree (prints figures, never fails).

    python3 bench/bench_efa.py [--shape trn2.48xlarge] [--collections 60]

CPU time of one collection (thread CPU clock, after a short sleep as in the daemon), with the counters changing
between collections (the simulator's traffic), median over the collections, beside the floor measured in the same
process, interleaved: a bare loop of one pread of every file the group reads (each port's counters, state and
rate) on the same kept descriptors, nothing else. The issue's target: the group costs at most 2x the floor.
Compare the ratio, not the absolute figures, across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.inprocess import cpu_ms, pread_floor, simulated_host  # noqa: E402
from neuron_monitor.groups.efa_counters.collector import EfaCounters  # noqa: E402
from neuron_monitor.groups.efa_counters.sim import EfaTree  # noqa: E402
from neuron_monitor.host.rootfs import RootFS  # noqa: E402

SETTLE = 0.005  # seconds of sleep before each timed call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="trn2.48xlarge")
    ap.add_argument("--collections", type=int, default=60)
    args = ap.parse_args()
    with simulated_host(args.shape) as host:
        shape = host.shape
        efa = EfaTree(host.root, shape, {"neuron_pci_parent": True})
        busy = dict.fromkeys(range(shape.devices), 0.7)
        rootfs = RootFS(host.root)
        group = EfaCounters(rootfs)

        def collect() -> object:
            rootfs.begin_collection(time.monotonic())  # as the scheduler brackets every collection
            try:
                return group.collect()
            finally:
                rootfs.end_collection()

        group.prime()
        collect()
        plan = group._plan
        assert plan is not None
        fds = [*plan.fds, *(f.fileno() for f in (*plan.state_files, *plan.rate_files) if f is not None)]
        floor = pread_floor(fds)

        ours: list[float] = []
        base: list[float] = []
        for _ in range(args.collections):
            efa.step(1.0, busy)
            efa.write()
            base.append(cpu_ms(floor, SETTLE))
            ours.append(cpu_ms(collect, SETTLE))
        body = collect()
        assert isinstance(body, dict) and "error" not in body, body.get("error") if isinstance(body, dict) else body
        mo, mb = statistics.median(ours), statistics.median(base)
        print(
            f"efa_counters on a simulated {shape.name}: {len(efa.adapters)} adapters, {len(fds)} files per collection"
        )
        print(f"  collection (median of {args.collections}): {mo:.3f} ms CPU")
        print(f"  floor: one pread of each file, nothing else: {mb:.3f} ms CPU")
        print(f"  ratio collection / floor: {mo / mb:.2f}x (target <= 2x)")
        group.close()


if __name__ == "__main__":
    main()
