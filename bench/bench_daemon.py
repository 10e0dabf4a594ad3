"""Daemon core benchmark: CPU ms and peak RSS per report for the host groups at period 0.1 s.

Two roots: a fake 192-vCPU procfs (tests/fixtures/proc) and this host's /. Baseline, in the same run: the same
daemon with no metric groups (only instance_info and neuron_hardware_info), i.e. the scheduler and writer alone.
Median of --repeat runs. Targets (issue 2): <= 1 ms CPU per report, <= 40 MiB RSS.

    python bench/bench_daemon.py [--reports 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.daemon_run import REPO, RunFigures, run_daemon

HOST_GROUPS = {"period": "100ms", "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}]}
NO_GROUPS = {"period": "100ms"}


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
        shutil.copy(REPO / "tests/fixtures/proc/stat_192cpu", fake / "proc/stat")
        shutil.copy(REPO / "tests/fixtures/proc/meminfo_trn2", fake / "proc/meminfo")
        print(f"daemon, host groups at 0.1 s, {args.reports} reports per run, median of {args.repeat} runs")
        print(f"{'root':<22}{'config':<14}{'CPU ms/report':>14}{'CPU s/1000':>12}{'peak RSS MiB':>14}{'reports/s':>11}")
        rows = []
        for label, root in (("fake 192-vCPU procfs", str(fake)), ("this host /", "/")):
            base = median_run(NO_GROUPS, root, args.reports, args.repeat, tmp)
            full = median_run(HOST_GROUPS, root, args.reports, args.repeat, tmp)
            for cname, f in (("no groups", base), ("host groups", full)):
                print(
                    f"{label:<22}{cname:<14}{f.cpu_ms_per_report:>14.3f}{f.cpu_ms_per_report:>12.3f}"
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
