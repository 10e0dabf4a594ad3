"""Benchmark: the Neuron device layer on a simulated trn2.48xlarge with 16 runtimes (prints figures, never fails).

    python3 bench/bench_device.py [--shape trn2.48xlarge] [--runtimes 16] [--reports 30] [--daemon-repeat 3]

1. In process, per full report (all seven groups, one application snapshot, report assembly and JSON encoding):
   CPU time (thread CPU clock), median over repeated reports at a 1 s and a 0.1 s cadence, with a per-part
   breakdown, and the ratio to a baseline measured in the same process (one read and parse of /proc/stat).
2. Before/after, the Neuron side only (application snapshot and the four Neuron groups): the device layer as it was
   before the performance work (frozen in tests/neuron/reference, the oracle of tests/neuron/test_equivalence.py)
   against the current one, in the same process on the same simulator, interleaved: each collection runs after
   the same sleep, and which of the two goes first alternates. Medians per part and the ratio after/before.
3. The real daemon (``python3 -m neuron_monitor.daemon.cli --root <sim>``) with every group at 1 s and at 0.1 s:
   CPU time per report (utime + stime from /proc/<pid>/stat over 30 and 200 reports) and peak RSS (VmHWM),
   median of 3 runs each, its stdout a pipe read by this process (as an exporter would).

Figures are CPU time of the collecting thread after a sleep, as in the daemon: caches are cold, which on a shared
VM costs several times the warm figure. Compare within one run (the ratios), not across runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.daemon_run import RUNTIME_GROUPS as RUNTIME  # noqa: E402
from bench.daemon_run import SYSTEM_GROUPS as SYSTEM  # noqa: E402
from bench.daemon_run import RunFigures, aws_groups_config, run_daemon, speed_reference, write_config  # noqa: E402
from bench.inprocess import cpu_ms, median_cpu_ms, timed  # noqa: E402
from neuron_monitor.daemon import report as rpt  # noqa: E402
from neuron_monitor.groups.registry import load_runtime_group, load_system_group  # noqa: E402
from neuron_monitor.host.procfs import parse_stat  # noqa: E402
from neuron_monitor.host.rootfs import RootFS  # noqa: E402
from neuron_monitor.neuron.backend import open_backend  # noqa: E402
from neuron_monitor.sim.temporary import TemporarySimulator  # noqa: E402

NEURON = ("snapshot", "neuroncore_counters", "execution_stats", "memory_used", "neuron_hw_counters")


def system_object(group: Any, cadence: float) -> dict[str, Any]:
    """One collection of a system group, as the report's group object."""
    return rpt.group_object(group.collect(), cadence, "", True)


def assemble_encode(
    apps: Any, bodies: dict[str, dict[int, Any]], sysdata: dict[str, Any], hw_info: Any, cadence: float
) -> bytes:
    """The report line of one collection: the runtime entries, the system groups, the hardware info, encoded."""
    entries = [
        rpt.runtime_entry(a.pid, a.tag, a.error,
                          {n: rpt.group_object(bodies[n].get(a.pid, {}), cadence, "", True) for n in RUNTIME})
        for a in apps
    ]  # fmt: skip
    return rpt.encode(rpt.build_report(entries, sysdata, rpt.empty_instance_info(""), hw_info, time.time()))


def in_process(root: Path, cadence: float, reports: int) -> dict[str, Any]:
    fs = RootFS(root)
    backend = open_backend(fs)
    runtime = {n: load_runtime_group(n)(fs) for n in RUNTIME}
    system = {n: load_system_group(n)(fs) for n in SYSTEM}
    for g in system.values():
        g.prime()
    parts: dict[str, list[float]] = {k: [] for k in ("snapshot", *RUNTIME, *SYSTEM, "assemble+encode", "total")}
    hw_info = backend.hardware_info()
    for i in range(reports + 2):
        time.sleep(cadence)
        t0 = time.thread_time()
        times: dict[str, float] = {}
        apps, times["snapshot"] = timed(backend.apps.snapshot)
        bodies: dict[str, dict[int, Any]] = {}
        for name, g in runtime.items():
            bodies[name], times[name] = timed(partial(g.collect, apps, []))
        sysdata = {}
        for name, g in system.items():
            sysdata[name], times[name] = timed(partial(system_object, g, cadence))
        line, times["assemble+encode"] = timed(partial(assemble_encode, apps, bodies, sysdata, hw_info, cadence))
        times["total"] = (time.thread_time() - t0) * 1000
        if i >= 2:  # the first collections have no previous sample
            for k, v in times.items():
                parts[k].append(v)
    baseline = median_cpu_ms(lambda: parse_stat(fs.read_bytes("proc/stat")), 50)
    backend.close()
    med = {k: statistics.median(v) for k, v in parts.items()}
    return {"apps": len(apps), "report_bytes": len(line), "median_ms": med, "baseline_ms": baseline}


class NeuronSide:
    """One app source and the four Neuron groups, from the given modules; ``run()`` times one collection."""

    def __init__(self, fs: RootFS, apps_module: Any, group_modules: dict[str, Any]) -> None:
        self.source = apps_module.NeuronAppSource(fs)
        self.runtime = {n: group_modules[n].GROUP(fs) for n in NEURON[1:4]}
        self.hw = group_modules["neuron_hw_counters"].GROUP(fs)
        self.hw.prime()
        self.times: dict[str, list[float]] = {k: [] for k in (*NEURON, "total")}

    def run(self, keep: bool) -> None:
        t0 = time.thread_time()
        t: dict[str, float] = {}
        apps, t["snapshot"] = timed(self.source.snapshot)
        for name, g in self.runtime.items():
            t[name] = cpu_ms(partial(g.collect, apps, []))
        t["neuron_hw_counters"] = cpu_ms(self.hw.collect)
        t["total"] = (time.thread_time() - t0) * 1000
        if keep:
            for k, v in t.items():
                self.times[k].append(v)

    def close(self) -> None:
        self.source.close()
        self.hw.close()


def before_after(root: Path, cadence: float, reports: int) -> dict[str, dict[str, float]]:
    from neuron_monitor.groups.execution_stats import collector as execution_stats
    from neuron_monitor.groups.memory_used import collector as memory_used
    from neuron_monitor.groups.neuron_hw_counters import collector as neuron_hw_counters
    from neuron_monitor.groups.neuroncore_counters import collector as neuroncore_counters
    from neuron_monitor.neuron import apps as current_apps
    from tests.neuron import reference

    fs = RootFS(root)
    current = {"neuroncore_counters": neuroncore_counters, "execution_stats": execution_stats,
               "memory_used": memory_used, "neuron_hw_counters": neuron_hw_counters}  # fmt: skip
    frozen = {n: importlib.import_module(f"{reference.__name__}.{n}") for n in current}
    sides = {"before": NeuronSide(fs, importlib.import_module(f"{reference.__name__}.apps"), frozen),
             "after": NeuronSide(fs, current_apps, current)}  # fmt: skip
    for i in range(reports + 2):
        order = ("before", "after") if i % 2 else ("after", "before")
        for name in order:
            time.sleep(cadence)
            sides[name].run(keep=i >= 2)  # the first collections have no previous sample
    for side in sides.values():
        side.close()
    return {name: {k: statistics.median(v) for k, v in side.times.items()} for name, side in sides.items()}


def daemon_runs(root: Path, period: str, reports: int, repeat: int) -> list[RunFigures]:
    """``repeat`` runs of the real daemon with every group at ``period``, ``reports`` reports each."""
    conf = write_config(aws_groups_config(period))
    try:
        return [run_daemon(["-c", str(conf), "--root", str(root), "--no-imds"], reports) for _ in range(repeat)]
    finally:
        conf.unlink()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="trn2.48xlarge")
    ap.add_argument("--runtimes", type=int, default=16)
    ap.add_argument("--reports", type=int, default=30)
    ap.add_argument("--daemon-repeat", type=int, default=3, help="daemon runs per cadence (median)")
    ap.add_argument("--daemon-reports-1s", type=int, default=30, help="reports per daemon run at 1 s")
    ap.add_argument("--daemon-reports-100ms", type=int, default=200, help="reports per daemon run at 0.1 s")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}; speed "
          f"reference: sum(range(10**7)) takes {speed_reference():.0f} ms CPU")  # fmt: skip
    with TemporarySimulator(args.shape, runtimes=args.runtimes, seed=1, load_time=0.0) as sim:
        time.sleep(0.5)
        print(f"shape {args.shape}, {args.runtimes} runtimes, simulator root {sim.root}")
        for cadence in (1.0, 0.1):
            n = args.reports if cadence < 1 else max(5, args.reports // 3)
            r = in_process(sim.root, cadence, n)
            med = r["median_ms"]
            print(f"\nin process, a full report every {cadence} s ({n} reports, {r['apps']} apps, "
                  f"{r['report_bytes']} bytes/report): median CPU {med['total']:.2f} ms per report, "
                  f"{med['total'] / r['baseline_ms']:.1f} x baseline (read+parse /proc/stat "
                  f"{r['baseline_ms']:.3f} ms)")  # fmt: skip
            for k, v in med.items():
                if k != "total":
                    print(f"  {k:28} {v:7.3f} ms")
        for cadence in (1.0, 0.1):
            n = args.reports if cadence < 1 else max(5, args.reports // 3)
            r = before_after(sim.root, cadence, n)
            b, a = r["before"], r["after"]
            print(f"\nNeuron side before/after, every {cadence} s ({n} interleaved collections each): "
                  f"median {b['total']:.2f} -> {a['total']:.2f} ms CPU, x{a['total'] / b['total']:.2f}")  # fmt: skip
            for k in NEURON:
                print(f"  {k:28} {b[k]:7.3f} -> {a[k]:7.3f} ms  x{a[k] / b[k]:.2f}")
            before, after = sum(b[k] for k in NEURON), sum(a[k] for k in NEURON)
            print(f"  {'sum of part medians':28} {before:7.3f} -> {after:7.3f} ms  x{after / before:.2f}")
        for period, reports in (("1s", args.daemon_reports_1s), ("100ms", args.daemon_reports_100ms)):
            runs = daemon_runs(sim.root, period, reports, args.daemon_repeat)
            cpu = statistics.median(r.cpu_ms_per_report for r in runs)
            rss = max(r.peak_rss_mib for r in runs)
            each = ", ".join(f"{r.cpu_ms_per_report:.2f}" for r in runs)
            print(f"\ndaemon, every group at {period}: median of {len(runs)} runs x {reports} reports: "
                  f"{cpu:.2f} ms CPU per report (runs: {each}), peak RSS {rss:.1f} MiB; "
                  f"target <= 3 ms, <= 50 MiB: {'met' if cpu <= 3.0 and rss <= 50 else 'NOT met'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
