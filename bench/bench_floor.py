"""Benchmark: the daemon against the floor (what reading its raw inputs costs), and its start-up (prints, never fails).

    python3 bench/bench_floor.py [--shape trn2.48xlarge] [--runtimes 16] [--reports 200] [--repeat 3]
                                 [--against OTHER_CHECKOUT [--rounds 8]] [--health-watch-ab [--rounds 8]]

1. The floor and the daemon, at the same time on the same simulated host, every group at 0.1 s. The floor is a
   process (``bench/bench_floor.py --floor-loop``) that, on the same 0.1 s grid, only reads what the daemon reads —
   kept-descriptor preads of /proc/stat, /proc/meminfo, each runtime's /proc/PID/stat and every ECC file, and one
   read of the bytes the daemon reads of each data block in use (on the simulator's files one pread of ``NDS_END``
   bytes per block and report, as the daemon's `FileBlock`), then a copy of its counter regions (ND counters, NC
   counters of each physical core) — and writes a report of the same size (one of the daemon's own reports,
   re-encoded with orjson) to stdout. Nothing is parsed. Not in the floor: the device listing and each device's
   application list and acquire table, which the daemon reads to notice devices and applications coming and going
   (part of its excess). Both run side by side (so a busy shared machine slows both alike); CPU comes from the OS
   (schedstat of every thread, see bench/daemon_run.py) over the same number of reports after the first; the ratio
   daemon / floor is printed per run, and the median of ``--repeat`` runs. Peak RSS of the daemon is printed too.
   ``--pure`` runs every daemon with ``NEURON_MONITOR_NO_NATIVE=1`` (the pure-Python twins only).
2. Start-up: wall time from exec to the first report line on the simulator, for ``--once`` and for a normal start
   (median of ``--repeat``), beside the time ``python -c pass`` and ``python -c "import orjson"`` take (the
   interpreter's own floor), and the load average.
3. With ``--against TREE`` (another checkout, e.g. ``git worktree add /tmp/old main~3``): ``--rounds`` rounds in
   which this checkout's daemon, TREE's daemon and the floor run at the same time on the one simulator (which
   daemon starts first alternates), printing this / TREE daemon CPU per round and the median: an A/B that a
   drifting machine slows on both sides alike.
4. With ``--health-watch-ab``: the cost of the device-health watch. ``--rounds`` rounds in which this checkout's
   daemon with the ``neuron_device_health`` group (at 5 s) and its 0.25 s watch (A) and the same daemon with
   ``--health-watch-interval 0`` (B), every other group at 0.1 s, run at the same time with the floor (which
   starts first alternates); prints A / B daemon CPU per round and the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.daemon_run import RunFigures, aws_groups_config, run_command, speed_reference, write_config  # noqa: E402

ECC = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_uncorrected", "sram_ecc_corrected")


def floor_loop(root: Path, period: float, sample: Path) -> None:
    """The floor: read the daemon's raw inputs on the same grid and write a same-size report, forever."""
    import orjson

    from neuron_monitor.host.rootfs import RootFS
    from neuron_monitor.neuron import layout as L
    from neuron_monitor.neuron.devio import Block, open_device
    from neuron_monitor.neuron.sysfs import DriverTree

    fs = RootFS(root)
    tree = DriverTree(fs)
    kept = [fs.open_kept("proc/stat"), fs.open_kept("proc/meminfo")]
    regions: list[tuple[Block, int, int]] = []  # (block, start, end) of each counter region in use
    pids: set[int] = set()
    for index in tree.device_indexes():
        kept += [fs.open_kept(f"{tree.stats_rel(index)}/hardware/{name}") for name in ECC]
        cores = tree.phys_cores(index)
        dev = open_device(fs, index)
        for app in dev.list_apps():
            where = dev.acquire(app.pid)
            if where is None:
                continue
            pids.add(app.pid)
            block = dev.map_block(where[0], L.NDS_END)  # the bytes the daemon reads of the slab (neuron/apps.py)
            regions.append((block, L.ND_COUNTERS_OFFSET, L.ND_COUNTERS_OFFSET + L.ND_COUNTER_COUNT * 8))
            base = min(cores, L.NC_BASE_CORES)
            regions.append((block, L.NC_COUNTERS_OFFSET, L.NC_COUNTERS_OFFSET + base * L.NC_COUNTER_COUNT * 8))
            if cores > L.NC_BASE_CORES:
                for core in range(L.NC_BASE_CORES, cores):
                    start = L.EXT_NC_DATA_OFFSET + (core - L.NC_BASE_CORES) * L.EXT_NC_DATA_STRIDE * 8
                    regions.append((block, start, start + L.NC_COUNTER_COUNT * 8))
    kept += [fs.open_kept(f"proc/{pid}/stat") for pid in sorted(pids)]
    blocks = list({id(block): block for block, _, _ in regions}.values())  # each block once, in order
    report = json.loads(sample.read_bytes())
    out = sys.stdout.buffer
    tick = time.monotonic()
    while True:
        tick += period
        time.sleep(max(0.0, tick - time.monotonic()))
        for f in kept:
            f.read()
        buffers = {id(block): block.read() for block in blocks}  # one read (a pread on a file) per block
        for block, start, end in regions:
            buffers[id(block)][start:end]
        out.write(orjson.dumps(report) + b"\n")
        out.flush()


def health_watch_ab(daemon: list[str], floor: list[str], reports: int, rounds: int) -> None:
    """Rounds of the daemon with the health group and its watch (A) and without the watch (B), beside the floor."""
    ratios: list[float] = []
    # the health group at the default 5 s, so its watch does the work (at 0.1 s its collections would make the
    # watch skip: they read the same files)
    conf = write_config(aws_groups_config("100ms", ({"type": "neuron_device_health", "period": "5s"},)))
    with_group = [*daemon[:4], str(conf), *daemon[5:]]
    watch, no_watch = with_group, [*with_group, "--health-watch-interval", "0"]
    print(f"\nthe health watch: with it (A) and without it (B), neuron_device_health at 5 s in both, {rounds} rounds "
          f"of {reports} reports:")  # fmt: skip
    try:
        for i in range(rounds):
            runs = [("A", watch, REPO), ("B", no_watch, REPO), ("floor", floor, REPO)]
            if i % 2:
                runs[0], runs[1] = runs[1], runs[0]
            out = together(runs, reports)
            a, b, fl = (out[k].cpu_ms_per_report for k in ("A", "B", "floor"))
            ratios.append(a / b)
            print(f"  round {i + 1}: A {a:.2f} ms, B {b:.2f} ms CPU/report -> A / B {ratios[-1]:.3f}; floor {fl:.2f} ms"
                  f"; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        conf.unlink()
    print(f"A / B (watch / no watch), median of {rounds}: {statistics.median(ratios):.3f}")


def first_line_s(cmd: list[str]) -> tuple[float, bytes]:
    """Wall seconds from exec to the first line ``cmd`` writes, and that line."""
    t = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line == b"\n":  # the daemon's resync newline comes before its first report, in the same write
        line = proc.stdout.readline()
    took = time.monotonic() - t
    proc.terminate()
    proc.wait(timeout=30)
    return took, line


def together(runs: list[tuple[str, list[str], Path]], reports: int) -> dict[str, RunFigures]:
    """The (name, command, source tree) runs at the same time, ``reports`` reports each, started in list order."""
    out: dict[str, RunFigures] = {}
    errors: list[BaseException] = []

    def run(name: str, cmd: list[str], tree: Path) -> None:
        try:
            out[name] = run_command(cmd, reports, tree)
        except BaseException as e:  # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=run, args=r) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def pair(daemon: list[str], floor: list[str], reports: int) -> tuple[RunFigures, RunFigures]:
    """The daemon and the floor run at the same time, ``reports`` reports each."""
    out = together([("daemon", daemon, REPO), ("floor", floor, REPO)], reports)
    return out["daemon"], out["floor"]


def daemon_of(tree: Path, daemon: list[str]) -> list[str]:
    """``daemon`` for the checkout ``tree``: before issue 26 the daemon's module was ``neuron_monitor.cli``; before
    ``--exact-groups`` no group was added to a configuration, so the flag is left out there."""
    cli = tree / "neuron_monitor" / "daemon" / "cli.py"
    if not cli.exists():
        daemon = [("neuron_monitor.cli" if a == "neuron_monitor.daemon.cli" else a) for a in daemon]
        cli = tree / "neuron_monitor" / "cli.py"
    if "--exact-groups" not in cli.read_text(errors="replace"):
        daemon = [a for a in daemon if a != "--exact-groups"]
    return daemon


def against(daemon: list[str], floor: list[str], tree: Path, reports: int, rounds: int) -> None:
    """Rounds of this checkout's daemon, ``tree``'s daemon and the floor at the same time; ratios printed."""
    ratios: list[float] = []
    print(f"\nthis checkout's daemon (new) beside {tree}'s (old) and the floor, {rounds} rounds of {reports} reports:")
    for i in range(rounds):
        runs = [("new", daemon, REPO), ("old", daemon_of(tree, daemon), tree), ("floor", floor, REPO)]
        if i % 2:
            runs[0], runs[1] = runs[1], runs[0]
        out = together(runs, reports)
        new, old, fl = (out[k].cpu_ms_per_report for k in ("new", "old", "floor"))
        ratios.append(new / old)
        print(f"  round {i + 1}: new {new:.2f} ms, old {old:.2f} ms CPU/report -> new / old {ratios[-1]:.3f}; "
              f"floor {fl:.2f} ms (new {new / fl:.2f} x, old {old / fl:.2f} x); "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"new / old, median of {rounds}: {statistics.median(ratios):.3f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="trn2.48xlarge")
    ap.add_argument("--runtimes", type=int, default=16)
    ap.add_argument("--reports", type=int, default=200, help="reports per run (after the first)")
    ap.add_argument("--repeat", type=int, default=3, help="runs (median)")
    ap.add_argument("--against", metavar="TREE", type=Path, help="also an A/B against the daemon of this checkout")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of the A/B (with --against)")
    ap.add_argument("--health-watch-ab", action="store_true", help="A/B of the device-health watch (see above)")
    ap.add_argument("--pure", action="store_true", help="the daemons without the compiled helper")
    ap.add_argument("--floor-loop", metavar="ROOT", help=argparse.SUPPRESS)
    ap.add_argument("--sample", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--period", type=float, default=0.1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_loop:
        floor_loop(Path(args.floor_loop), args.period, Path(args.sample))
        return 0

    from neuron_monitor.sim.temporary import TemporarySimulator

    if args.pure:
        os.environ["NEURON_MONITOR_NO_NATIVE"] = "1"  # inherited by every process started below

    py = sys.executable
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}; speed "
          f"reference: sum(range(10**7)) takes {speed_reference():.0f} ms CPU; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; compiled helper "
          f"{'off (--pure)' if args.pure else 'on when built'}")  # fmt: skip
    conf = write_config(aws_groups_config("100ms"))
    sample = Path(tempfile.mkstemp(suffix=".json")[1])
    try:
        with TemporarySimulator(args.shape, runtimes=args.runtimes, seed=1, load_time=0.0) as sim:
            time.sleep(0.5)
            # --exact-groups: AWS's seven groups only, what the floor reads (a configuration naming only AWS's groups
            # otherwise also gets neuron_device_health, efa_counters and neuron_device_telemetry)
            daemon = [py, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--root", str(sim.root), "--no-imds",
                      "--exact-groups"]  # fmt: skip
            print(f"shape {args.shape}, {args.runtimes} runtimes, every group at 0.1 s, simulator root {sim.root}")
            starts: dict[str, list[float]] = {"python -c pass": [], "python -c 'import orjson'": [],
                                              "daemon --once": [], "daemon (normal start)": []}  # fmt: skip
            line = b""
            for _ in range(args.repeat):
                starts["python -c pass"].append(first_line_s([py, "-c", "print()"])[0])
                starts["python -c 'import orjson'"].append(first_line_s([py, "-c", "import orjson; print()"])[0])
                took, line = first_line_s([*daemon, "--once"])
                starts["daemon --once"].append(took)
                starts["daemon (normal start)"].append(first_line_s(daemon)[0])
            print(f"\nstart-up, exec to first line, median of {args.repeat} (load {os.getloadavg()[0]:.1f}):")
            base = statistics.median(starts["python -c pass"])
            for name, times in starts.items():
                med = statistics.median(times)
                print(f"  {name:28} {med * 1000:7.0f} ms  ({med / base:.1f} x python -c pass)")
            if not line:
                print("daemon wrote no report")
                return 1
            sample.write_bytes(line)
            floor = [py, str(Path(__file__).resolve()), "--floor-loop", str(sim.root), "--sample", str(sample)]
            ratios = []
            print(f"\ndaemon and floor side by side, {args.reports} reports each ({len(line)} bytes/report):")
            for i in range(args.repeat):
                d, f = pair(daemon, floor, args.reports)
                ratios.append(d.cpu_ms_per_report / f.cpu_ms_per_report)
                print(f"  run {i + 1}: daemon {d.cpu_ms_per_report:.2f} ms CPU/report (peak RSS {d.peak_rss_mib:.1f} "
                      f"MiB), floor {f.cpu_ms_per_report:.2f} ms -> {ratios[-1]:.2f} x floor; load "
                      f"{os.getloadavg()[0]:.1f}")  # fmt: skip
            ratio = statistics.median(ratios)
            target = 2.5 if args.pure else 1.5  # issue 41's goal 3
            print(f"daemon / floor, median of {args.repeat}: {ratio:.2f} x (target <= {target}: "
                  f"{'met' if ratio <= target else 'NOT met'})")  # fmt: skip
            if args.against:
                against(daemon, floor, args.against.resolve(), args.reports, args.rounds)
            if args.health_watch_ab:
                health_watch_ab(daemon, floor, args.reports, args.rounds)
    finally:
        conf.unlink()
        sample.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
