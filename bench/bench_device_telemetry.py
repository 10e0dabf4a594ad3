"""Benchmark: the ``neuron_device_telemetry`` group on a simulated trn2.48xlarge tree (prints figures, never fails).

    python3 bench/bench_device_telemetry.py [--shape trn2.48xlarge] [--collections 40]

CPU time of one collection (thread CPU clock, after a short sleep as in the daemon), median over the collections,
beside two baselines measured in the same process, interleaved: the floor (one pread of every file the group reads,
on the same kept descriptors, nothing else) and ``neuron_hw_counters`` (the ECC group, 64 files). Compare the
ratios, not the absolute figures, across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.inprocess import cpu_ms, pread_floor, simulated_host  # noqa: E402
from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry  # noqa: E402
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters  # noqa: E402
from neuron_monitor.host.rootfs import RootFS  # noqa: E402

SETTLE = 0.01  # seconds of sleep before each timed call (as the daemon sleeps between collections)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="trn2.48xlarge")
    ap.add_argument("--collections", type=int, default=40)
    args = ap.parse_args()
    with simulated_host(args.shape) as host:
        group = NeuronDeviceTelemetry(RootFS(host.root))
        ecc = NeuronHwCounters(RootFS(host.root))
        group.prime()
        ecc.prime()
        group.collect()
        plan = group._plan
        assert plan is not None
        fds = [f.fileno() for f in (*plan.files, *plan.power.values(), *plan.health.values())]
        floor = pread_floor(fds)

        figures: dict[str, list[float]] = {"group": [], "floor": [], "ecc": []}
        for i in range(args.collections):
            runs = [("group", group.collect), ("floor", floor), ("ecc", ecc.collect)]
            for name, fn in runs if i % 2 else runs[::-1]:
                figures[name].append(cpu_ms(fn, SETTLE))
        med = {k: statistics.median(v) for k, v in figures.items()}
        print(f"{args.shape}: {len(fds)} files per collection")
        for name in ("group", "floor", "ecc"):
            print(f"  {name:6s} median CPU {med[name]:.2f} ms")
        print(f"  group / floor (one pread per file): {med['group'] / med['floor']:.2f}")
        print(f"  group / neuron_hw_counters: {med['group'] / med['ecc']:.2f}")
        group.close()
        ecc.close()


if __name__ == "__main__":
    main()
