"""Benchmark: a fleet of N simulated nodes through a Prometheus agent into a central Prometheus (``make fleet``).

The real daemon's reports for each shape are recorded once (bench/fleet/recording.py), then replayed into N real
exporters served by this one process (bench/fleet/exporters.py says why one process), scraped by Debian's
``prometheus`` in agent mode, remote-written into a central ``prometheus`` that evaluates the rules. A few nodes carry
an injected fault; some have a runtime that stops and starts again.

Two phases on the same recording, side by side: the exporters' default series budget, then ``--series-detail full``
(the set every node served before the budget: the baseline). Printed per phase: series per node by shape, active
series at the agent and at the central, samples per second into the central, scrape duration p50/p99 (from the
agent's ``scrape_duration_seconds``), agent and central memory (RSS) per 1,000 series, this process's CPU per scrape,
and whether the injected faults raised exactly their alerts; then full/budget ratios and the sizing for 1,000 and
10,000 nodes of the same mix. Nothing here passes or fails.

    python3 bench/bench_fleet.py [--nodes 100] [--seconds 90] [--scrape 10s] [--report-interval 5] [--only budget]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.fleet.harness import TIMING_ALERTS, Fleet, dashboard_queries, plan_fleet, seconds  # noqa: E402
from bench.fleet.recording import record  # noqa: E402
from neuron_monitor.exporters.prometheus.cli import runtime_collectors  # noqa: E402


@dataclass
class Figures:
    detail: str
    nodes: int
    series_by_shape: dict[str, int] = field(default_factory=dict)
    agent_series: float = 0.0
    central_series: float = 0.0
    samples_per_s: float = 0.0
    scrape_p50_ms: float = 0.0
    scrape_p99_ms: float = 0.0
    agent_rss_mib: float = 0.0
    central_rss_mib: float = 0.0
    agent_cpu_s_per_min: float = 0.0
    central_cpu_s_per_min: float = 0.0
    harness_cpu_ms_per_scrape: float = 0.0
    remote_write_failed: float = 0.0
    alerts_ok: bool = False
    alerts_note: str = ""
    dashboard_with_data: str = ""
    slow_scrapes: str = ""
    logs: str = ""

    @property
    def agent_mib_per_1k(self) -> float:
        return self.agent_rss_mib / max(self.agent_series / 1000, 1e-9)

    @property
    def central_mib_per_1k(self) -> float:
        return self.central_rss_mib / max(self.central_series / 1000, 1e-9)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def run_phase(fleet: Fleet, measure_s: float) -> Figures:
    central, agent, exporters = fleet.central, fleet.agent, fleet.exporters
    assert central is not None and agent is not None and exporters is not None
    n = len(fleet.plan.nodes)
    figures = Figures(fleet.detail, n)
    scrape_s = seconds(fleet.scrape_interval)
    fleet.wait("every node scraped", lambda: central.value('count(up{job="neuron-monitor"} == 1)') == n, 300, 1.0)
    fleet.wait(
        "counters at the central",
        lambda: central.value("count(count by (instance) (execution_errors_total))") == n,
        300,
        1.0,
    )
    for e in exporters.exporters:  # one node per shape, as scraped
        shape = e.node.run.shape
        if shape not in figures.series_by_shape:
            text = e.collector.scrape(runtime_collectors(), False).decode()
            figures.series_by_shape[shape] = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    exporters.activate_faults()
    expected = fleet.expected_alerts()
    seen: set[tuple[str, str, str]] = set()
    c0, a0 = central.self_metrics(), agent.self_metrics()
    cpu0, acpu0, ccpu0, t0 = time.process_time(), agent.cpu_seconds(), central.cpu_seconds(), time.monotonic()
    scrapes0 = c0.get("prometheus_tsdb_head_samples_appended_total", 0.0)
    deadline = t0 + measure_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # a central too busy to answer in 30 s: ask again
            seen |= fleet.firing()
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    with contextlib.suppress(OSError):
        seen |= fleet.firing()
    dt = time.monotonic() - t0
    c1, a1 = central.self_metrics(), agent.self_metrics()
    figures.samples_per_s = (c1.get("prometheus_tsdb_head_samples_appended_total", 0.0) - scrapes0) / dt
    figures.central_series = c1.get("prometheus_tsdb_head_series", 0.0)
    figures.agent_series = a1.get("prometheus_agent_active_series", 0.0)
    figures.agent_rss_mib = agent.rss_bytes() / 2**20
    figures.central_rss_mib = central.rss_bytes() / 2**20
    figures.agent_cpu_s_per_min = (agent.cpu_seconds() - acpu0) * 60 / dt
    figures.central_cpu_s_per_min = (central.cpu_seconds() - ccpu0) * 60 / dt
    scrapes = n * dt / scrape_s
    figures.harness_cpu_ms_per_scrape = (time.process_time() - cpu0) * 1000 / max(scrapes, 1)
    figures.remote_write_failed = a1.get("prometheus_remote_storage_samples_failed_total", 0.0) - a0.get(
        "prometheus_remote_storage_samples_failed_total", 0.0
    )
    if figures.remote_write_failed:
        figures.logs = "agent log:\n" + agent.log_text()[-1500:] + "\ncentral log:\n" + central.log_text()[-1500:]
    window = f"{int(dt)}s"
    by_target = {
        r["metric"]["instance"]: [float(v) for _, v in r["values"]]
        for r in central.get("/api/v1/query", query=f'scrape_duration_seconds{{job="neuron-monitor"}}[{window}]')[
            "result"
        ]
    }
    durations = [d for values in by_target.values() for d in values]
    slow: dict[str, int] = {}
    for target, values in by_target.items():
        node = fleet.targets.get(target)
        if node is not None:
            slow[node.run.shape] = slow.get(node.run.shape, 0) + sum(1 for d in values if d >= 1.0)
    figures.slow_scrapes = f"{sum(slow.values())} of {len(durations)} scrapes took 1 s or more" + (
        " (" + ", ".join(f"{s} {n}" for s, n in sorted(slow.items()) if n) + ")" if any(slow.values()) else ""
    )
    figures.scrape_p50_ms = percentile(durations, 0.5) * 1000
    figures.scrape_p99_ms = percentile(durations, 0.99) * 1000
    down = {instance for name, instance, _ in expected if name == "NeuronExporterDown"}
    missing = expected - seen
    other = {k for k in seen if k not in expected and not (k[0] in TIMING_ALERTS and k[1] not in down)}
    figures.alerts_ok = not missing and not other
    figures.alerts_note = (
        f"{len(expected)} expected, {len(expected & seen)} fired"
        + (f"; missing {sorted(missing)}" if missing else "")
        + (f"; unexplained {sorted(other)}" if other else "")
        + (
            f"; timing alerts on healthy nodes {sorted(k for k in seen - expected if k not in other)}"
            if seen - expected - other
            else ""
        )
    )
    queries = dashboard_queries(rate_window=f"{4 * scrape_s}s")
    with_data = timeouts = 0
    for _, q in queries:
        try:
            with_data += bool(central.query(q))
        except OSError:  # a central too busy to answer in 30 s
            timeouts += 1
    figures.dashboard_with_data = f"{with_data}/{len(queries)}" + (f" ({timeouts} timed out)" if timeouts else "")
    return figures


def print_phase(f: Figures, scrape_s: int) -> None:
    print(f"\n== {f.detail}: {f.nodes} nodes, scrape every {scrape_s} s")
    print("series per node by shape: " + ", ".join(f"{s} {n:,}" for s, n in sorted(f.series_by_shape.items())))
    print(f"active series: agent {f.agent_series:,.0f}, central {f.central_series:,.0f}")
    print(f"samples/s into the central: {f.samples_per_s:,.0f}")
    print(f"scrape duration p50 / p99: {f.scrape_p50_ms:.1f} / {f.scrape_p99_ms:.1f} ms; {f.slow_scrapes}")
    print(
        f"memory (RSS): agent {f.agent_rss_mib:.0f} MiB ({f.agent_mib_per_1k:.2f} MiB per 1,000 series), "
        f"central {f.central_rss_mib:.0f} MiB ({f.central_mib_per_1k:.2f} MiB per 1,000 series)"
    )
    print(
        f"CPU: agent {f.agent_cpu_s_per_min:.1f} s/min, central {f.central_cpu_s_per_min:.1f} s/min, "
        f"exporters + replay {f.harness_cpu_ms_per_scrape:.2f} ms per scrape"
    )
    print(f"remote-write samples failed: {f.remote_write_failed:.0f}")
    if f.logs:
        print(f.logs)
    print(f"alerts: {'OK' if f.alerts_ok else 'NOT OK'} ({f.alerts_note})")
    print(f"fleet dashboard queries with data: {f.dashboard_with_data}")


def sizing(
    f: Figures, per_node: float, samples_per_node: float, scrape_s: int, agent_k: float, central_k: float
) -> None:
    """Memory as the phase's RSS plus ``agent_k``/``central_k`` MiB per 1,000 more series (the marginal cost)."""
    for nodes in (1_000, 10_000):
        series = per_node * nodes
        more = (series - f.central_series) / 1000
        agent = (f.agent_rss_mib + agent_k * (series - f.agent_series) / 1000) / 1024
        central = (f.central_rss_mib + central_k * more) / 1024
        print(
            f"  {nodes:,} nodes: {series / 1e6:.2f} M series, {samples_per_node * nodes:,.0f} samples/s at "
            f"{scrape_s} s scrapes ({samples_per_node * nodes * scrape_s / 60:,.0f} at 60 s); "
            f"agent ~{agent:.1f} GiB, central ~{central:.1f} GiB"
        )


def one_line(e: BaseException) -> str:
    """An error as one line: its first line, and the last line of anything after it (a process's log)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"[:400]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--seconds", type=float, default=90.0, help="measurement window per phase")
    p.add_argument("--scrape", default="10s", help="agent scrape interval (also the central's evaluation interval)")
    p.add_argument("--report-interval", type=float, default=5.0, help="seconds between a node's reports")
    p.add_argument("--only", choices=("budget", "full"), default=None)
    args = p.parse_args()
    scrape_s = seconds(args.scrape)
    plan = plan_fleet(args.nodes)
    mix = [f"{r.shape} x{sum(1 for n in plan.nodes if n.run == r)} ({r.runtimes} runtimes)" for r in plan.runs]
    print(f"fleet of {len(plan.nodes)} nodes: " + ", ".join(mix))
    faults = [f"{n.name} {n.fault.kind}" for n in plan.nodes if n.fault]
    print(f"faults: {', '.join(faults)}; runtime restarts on {sum(1 for n in plan.nodes if n.churn)} nodes")
    t = time.monotonic()
    recorded = record(plan.runs, 3)
    print(
        f"recorded {sum(len(v) for v in recorded.values())} reports of {len(recorded)} shapes in "
        f"{time.monotonic() - t:.0f} s"
    )
    results: dict[str, Figures] = {}
    for detail in ("budget", "full"):
        if args.only and detail != args.only:
            continue
        fleet = Fleet(
            plan,
            detail=detail,
            report_interval=args.report_interval,
            scrape_interval=args.scrape,
            hold=f"{3 * scrape_s}s",
            window=f"{6 * scrape_s}s",
            recorded=recorded,
        )
        try:
            fleet.start()
            results[detail] = run_phase(fleet, args.seconds)
            print_phase(results[detail], scrape_s)
        except (OSError, RuntimeError) as e:  # no prometheus binary, or it exited or never became ready
            print(f"bench_fleet: the {detail} phase could not run: {one_line(e)}", file=sys.stderr)
            return 1
        finally:
            fleet.stop()
    if len(results) == 2:
        b, f = results["budget"], results["full"]
        print("\n== full / budget (the budget's saving; full is the set before the budget)")
        print(
            f"central series {ratio(f.central_series, b.central_series)}, samples/s "
            f"{ratio(f.samples_per_s, b.samples_per_s)}, scrape p50 {ratio(f.scrape_p50_ms, b.scrape_p50_ms)}, "
            f"p99 {ratio(f.scrape_p99_ms, b.scrape_p99_ms)}, "
            f"central RSS {ratio(f.central_rss_mib, b.central_rss_mib)}, "
            f"agent RSS {ratio(f.agent_rss_mib, b.agent_rss_mib)}"
        )
    agent_k, central_k = next(iter(results.values())).agent_mib_per_1k, next(iter(results.values())).central_mib_per_1k
    if len(results) == 2:  # the marginal memory per 1,000 series: what the full phase's extra series cost
        b, f = results["budget"], results["full"]
        agent_k = (f.agent_rss_mib - b.agent_rss_mib) / max((f.agent_series - b.agent_series) / 1000, 1e-9)
        central_k = (f.central_rss_mib - b.central_rss_mib) / max((f.central_series - b.central_series) / 1000, 1e-9)
        print(f"marginal memory per 1,000 series: agent {agent_k:.2f} MiB, central {central_k:.2f} MiB")
    for detail, fig in results.items():
        per_node = fig.central_series / fig.nodes
        print(f"\n== sizing at {detail} detail (this mix; {per_node:,.0f} series per node as stored)")
        sizing(fig, per_node, fig.samples_per_s / fig.nodes, scrape_s, agent_k, central_k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
