"""Benchmark: is a kept descriptor worth keeping? (prints figures, never fails; docs/performance.md, "Descriptors")

    python3 bench/bench_descriptors.py [--shape trn2.48xlarge] [--rounds 30]

Reads every per-core telemetry file (``neuron_coreK/stats/**/total``) of a simulated host three ways, interleaved,
with the reading thread's CPU time: one ``pread`` on a kept descriptor (what the daemon does), open + pread + close
by path, and open through the root's confinement (``RootFS.open_fd``: openat2 RESOLVE_IN_ROOT) + pread + close.
Prints the cost per file of each and the ratio to the kept descriptor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.sim.temporary import TemporarySimulator

FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="trn2.48xlarge")
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    with TemporarySimulator(args.shape, runtimes=0) as sim:
        root = Path(sim.root)
        fs = RootFS(root)
        base = root / "sys/devices/virtual/neuron_device"
        rels = [str(f.relative_to(root)) for f in sorted(base.glob("neuron*/neuron_core*/stats/**/total"))]
        kept = [fs.open_kept(r, 64) for r in rels]
        fds = [k.fileno() for k in kept]
        paths = [str(root / r) for r in rels]
        times: dict[str, list[int]] = {"kept": [], "by path": [], "confined": []}

        def kept_read() -> None:
            for fd in fds:
                os.pread(fd, 64, 0)

        def by_path() -> None:
            for path in paths:
                fd = os.open(path, FLAGS)
                os.pread(fd, 64, 0)
                os.close(fd)

        def confined() -> None:
            for rel in rels:
                fd = fs.open_fd(rel)
                os.pread(fd, 64, 0)
                os.close(fd)

        ways = [("kept", kept_read), ("by path", by_path), ("confined", confined)]
        for i in range(args.rounds):
            for name, way in ways[i % 3 :] + ways[: i % 3]:  # which goes first rotates
                time.sleep(0.02)
                t = time.thread_time_ns()
                way()
                times[name].append(time.thread_time_ns() - t)
        for f in kept:
            f.close()
    n = len(rels)
    base_us = statistics.median(times["kept"]) / 1e3 / n
    print(f"{n} per-core telemetry files of a simulated {args.shape}, {args.rounds} interleaved rounds:")
    for name, values in times.items():
        us = statistics.median(values) / 1e3 / n
        print(f"  {name:9} {us:6.2f} us per file  x{us / base_us:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
