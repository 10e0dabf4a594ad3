"""Daemon core benchmark: CPU ms and peak RSS per report for the host groups at period 0.1 s.

Two roots: a fake 192-vCPU procfs (the testdata of groups/vcpu_usage and groups/memory_info, its counters moved in
place every 50 ms by this process so that every vCPU's shares change as on a real host) and this host's /.
Baseline, in the same run: the same daemon with no metric groups (only instance_info and neuron_hardware_info), i.e.
the scheduler and writer alone. Median of --repeat runs. Targets (issue 2): <= 1 ms CPU per report, <= 40 MiB RSS.

    python bench/bench_daemon.py [--reports 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.daemon_run import REPO, RunFigures, run_daemon, speed_reference

HOST_GROUPS = {"period": "100ms", "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}]}
NO_GROUPS = {"period": "100ms"}


class MovingProcStat:
    """Moves every vCPU's jiffies in place (as the kernel presents /proc/stat) from a thread of this process."""

    def __init__(self, path: Path, interval: float = 0.05) -> None:
        self.path = path
        self.interval = interval
        self.rng = random.Random(192)
        self.rows = [line.split() for line in path.read_text().splitlines()]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _step(self) -> None:
        cpus = [r for r in self.rows if r[0].startswith("cpu") and r[0] != "cpu"]
        total = next(r for r in self.rows if r[0] == "cpu")
        for r in cpus:
            busy = self.rng.randint(0, 5)  # 5 jiffies per 50 ms at 100 Hz, split between user/system/idle
            user = self.rng.randint(0, busy)
            for col, add in ((1, user), (3, busy - user), (4, 5 - busy)):
                r[col] = str(int(r[col]) + add)
        for col in range(1, len(total)):
            total[col] = str(sum(int(r[col]) for r in cpus))
        for r in self.rows:
            if r[0] == "ctxt":
                r[1] = str(int(r[1]) + 5000)
        data = ("\n".join(" ".join(r) for r in self.rows) + "\n").encode()
        with open(self.path, "r+b") as f:
            f.write(data)
            f.truncate()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self._step()

    def __enter__(self) -> MovingProcStat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def median_run(conf: dict, root: str, reports: int, repeat: int, tmp: Path) -> RunFigures:
    path = tmp / "bench.conf"
    path.write_text(json.dumps(conf))
    runs = [run_daemon(["-c", str(path), "--root", root, "--no-imds"], reports) for _ in range(repeat)]
    cpu = statistics.median(r.cpu_s for r in runs)
    rss = statistics.median(r.peak_rss_mib for r in runs)
    wall = statistics.median(r.wall_s for r in runs)
    return RunFigures(reports, cpu, wall, rss)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        fake = tmp / "root192"
        (fake / "proc").mkdir(parents=True)
        shutil.copy(REPO / "neuron_monitor/groups/vcpu_usage/testdata/stat_192cpu", fake / "proc/stat")
        shutil.copy(REPO / "neuron_monitor/groups/memory_info/testdata/meminfo_trn2", fake / "proc/meminfo")
        print(f"daemon, host groups at 0.1 s, {args.reports} reports per run, median of {args.repeat} runs")
        print(f"machine speed reference: sum(range(10**7)) takes {speed_reference():.0f} ms CPU here")
        print(f"{'root':<22}{'config':<14}{'CPU ms/report':>14}{'peak RSS MiB':>14}{'reports/s':>11}")
        rows = []
        for label, root in (("fake 192-vCPU procfs", str(fake)), ("this host /", "/")):
            base = median_run(NO_GROUPS, root, args.reports, args.repeat, tmp)
            if root == str(fake):
                with MovingProcStat(fake / "proc" / "stat"):
                    full = median_run(HOST_GROUPS, root, args.reports, args.repeat, tmp)
            else:
                full = median_run(HOST_GROUPS, root, args.reports, args.repeat, tmp)
            for cname, f in (("no groups", base), ("host groups", full)):
                print(
                    f"{label:<22}{cname:<14}{f.cpu_ms_per_report:>14.3f}"
                    f"{f.peak_rss_mib:>14.1f}{f.reports / f.wall_s:>11.1f}"
                )
            rows.append((label, base, full))
        print()
        for label, base, full in rows:
            print(
                f"{label}: host groups cost {full.cpu_ms_per_report - base.cpu_ms_per_report:.3f} ms/report over the "
                f"bare scheduler ({full.cpu_ms_per_report / base.cpu_ms_per_report:.2f}x); target <= 1 ms total, "
                f"<= 40 MiB RSS: {'met' if full.cpu_ms_per_report <= 1.0 and full.peak_rss_mib <= 40 else 'NOT met'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
