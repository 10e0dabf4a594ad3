"""Start-up on a simulated host: ``neuron-monitor --simulate SHAPE --once``, exec to exit, against its baseline.

Baseline (the same run in the same loop): ``neuron-monitor --root TREE --once`` on a simulated host built once
beforehand and left running, i.e. the same one-report window without building, animating and removing a tree.
The two alternate; each run's wall time and CPU time (the process and every child it waited for: the simulator
and its workers) come from the OS. Prints median, min and max of each, the 1-minute load average during the runs,
and the ratio of the median wall times (simulate / baseline). ``--cpu N`` pins both to one vCPU (taskset).

    .venv/bin/python bench/bench_simulate_once.py --shape trn2.48xlarge --runs 10 [--cpu 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from neuron_monitor.sim.temporary import TemporarySimulator  # noqa: E402


def run_once(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU: its own and its waited-for children's); its output must be one
    report line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    got = subprocess.run(cmd, capture_output=True, cwd=REPO, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = got.stdout.strip().splitlines()
    if got.returncode != 0 or len(lines) != 1 or not lines[0].startswith(b"{"):
        raise SystemExit(f"{' '.join(cmd)}: exit {got.returncode}: {got.stderr.decode(errors='replace')[-400:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return (
        f"{name:9} wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
        f"CPU median {statistics.median(cpus):.2f} s (min {min(cpus):.2f}, max {max(cpus):.2f})"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="trn2.48xlarge")
    p.add_argument("--runs", type=int, default=10, help="runs of each (default 10)")
    p.add_argument("--cpu", default=None, help="pin both to this vCPU (taskset -c)")
    args = p.parse_args()
    daemon = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--once"]
    pin = ["taskset", "-c", args.cpu] if args.cpu is not None else []
    simulate: list[tuple[float, float]] = []
    baseline: list[tuple[float, float]] = []
    loads: list[float] = []
    with TemporarySimulator(args.shape) as sim:
        for i in range(args.runs):
            pair = [
                (simulate, [*pin, *daemon, "--simulate", args.shape]),
                (baseline, [*pin, *daemon, "--root", str(sim.root), "--no-imds"]),
            ]
            for into, cmd in pair if i % 2 == 0 else pair[::-1]:
                into.append(run_once(cmd))
                loads.append(os.getloadavg()[0])
    print(f"neuron-monitor --simulate {args.shape} --once, {args.runs} runs each, alternating"
          f"{f', pinned to vCPU {args.cpu}' if pin else ''}")  # fmt: skip
    print(summary("simulate", simulate))
    print(summary("baseline", baseline) + "  (--root on a tree built beforehand)")
    ratio = statistics.median(w for w, _ in simulate) / statistics.median(w for w, _ in baseline)
    print(f"ratio simulate / baseline (median wall): {ratio:.2f}")
    print(f"load average (1 min) during the runs: median {statistics.median(loads):.1f}, "
          f"min {min(loads):.1f}, max {max(loads):.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
