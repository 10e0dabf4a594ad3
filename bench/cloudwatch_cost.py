"""What neuron-monitor-cloudwatch costs per node and month, per shape, mode and series detail (docs/cloudwatch.md,
"Cost"): the real daemon (configs/monitor.conf, every group) on the simulator, its third report mapped as the
exporter maps it, then counted: distinct metrics, datums, PutMetricData calls and EMF bytes per report; the monthly
cost at list prices follows from those and the report period.

    python3 bench/cloudwatch_cost.py [--shapes trn2.48xlarge ...] [--period 5]

List prices (US East (N. Virginia), from https://aws.amazon.com/cloudwatch/pricing/; they vary by region):
custom metrics $0.30 per metric and month for an account's first 10,000 metrics, $0.10 for the next 240,000, $0.05
for the next 750,000, $0.02 beyond (prorated by the hour: a metric costs only in hours it receives data);
PutMetricData $0.01 per 1,000 requests; CloudWatch Logs standard ingestion $0.50 per GB (EMF lines are log events,
and the metrics extracted from them are custom metrics at the prices above).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.daemon_run import daemon_report_line  # noqa: E402
from neuron_monitor.exporters.cloudwatch.batching import pack  # noqa: E402
from neuron_monitor.exporters.cloudwatch.detail import SERIES_DETAILS  # noqa: E402
from neuron_monitor.exporters.cloudwatch.emf import encode_events  # noqa: E402
from neuron_monitor.exporters.cloudwatch.limits import DatumFilter  # noqa: E402
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper  # noqa: E402

METRIC_FIRST_TIER = 0.30  # $ per custom metric and month, an account's first 10,000 metrics
METRIC_SECOND_TIER = 0.10  # $ per custom metric and month, the next 240,000
REQUEST_PRICE = 0.01 / 1000  # $ per PutMetricData request
LOG_INGEST_PER_GB = 0.50  # $ per GB of CloudWatch Logs (standard class) ingested
MONTH_SECONDS = 30 * 24 * 3600
SHAPES = {"trn2.48xlarge": 16, "trn1.32xlarge": 8, "inf2.48xlarge": 6, "trn1.2xlarge": 2}


@dataclass(frozen=True)
class Figures:
    """One report of one shape mapped with one series detail."""

    metrics: int  # distinct (name, dimensions): the custom metrics this node keeps alive
    datums: int
    calls: int  # PutMetricData requests per report
    emf_bytes: int  # EMF bytes per report (the lines written, newline included)


@dataclass(frozen=True)
class MonthlyCost:
    metrics_first_tier: float
    metrics_second_tier: float
    api_requests: float
    emf_logs: float


def monthly_cost(f: Figures, period_s: float) -> MonthlyCost:
    """Dollars per node and month at the list prices above, one report every ``period_s`` seconds."""
    reports = MONTH_SECONDS / period_s
    return MonthlyCost(
        metrics_first_tier=f.metrics * METRIC_FIRST_TIER,
        metrics_second_tier=f.metrics * METRIC_SECOND_TIER,
        api_requests=f.calls * reports * REQUEST_PRICE,
        emf_logs=f.emf_bytes * reports / 1e9 * LOG_INGEST_PER_GB,
    )


def report_of(shape: str, runtimes: int) -> dict[str, Any]:
    """The third report of the real daemon (configs/monitor.conf at 1 s) on a simulated ``shape``."""
    from neuron_monitor.sim.temporary import TemporarySimulator

    config = json.loads((REPO / "configs" / "monitor.conf").read_text())
    config["period"] = "1s"
    with TemporarySimulator(shape, runtimes=runtimes, seed=1) as sim:
        line = daemon_report_line(config, ["--root", str(sim.root), "--no-imds"])
    report: dict[str, Any] = orjson.loads(line)
    report["instance_info"].update(instance_id="i-0123456789abcdef0", instance_type=shape, error="")
    return report


def figures(report: dict[str, Any], detail: str) -> Figures:
    datums = DatumFilter().keep_valid(ReportMapper(options=MapOptions(detail=detail)).map(report))
    queue = deque(datums)
    calls = 0
    while queue:
        pack(queue, protocol="json")
        calls += 1
    emf = encode_events(datums, "neuron_monitor")
    return Figures(
        metrics=len({(d.name, d.dims) for d in datums}),
        datums=len(datums),
        calls=calls,
        emf_bytes=sum(len(line) + 1 for line in emf),
    )


def table(rows: list[tuple[str, int, str, Figures]], period_s: float) -> str:
    out = [
        "| shape (runtimes) | detail | metrics | API calls / report | EMF KB / report | metrics $/month"
        " (first 10k / next 240k tier) | API mode: requests $/month | EMF mode: logs $/month |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape, runtimes, detail, f in rows:
        c = monthly_cost(f, period_s)
        out.append(
            f"| {shape} ({runtimes}) | {detail} | {f.metrics:,} | {f.calls} | {f.emf_bytes / 1000:.0f} |"
            f" {c.metrics_first_tier:,.0f} / {c.metrics_second_tier:,.0f} | {c.api_requests:.2f} |"
            f" {c.emf_logs:.2f} |"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--period", type=float, default=5.0, help="report period in seconds (default 5)")
    args = parser.parse_args()
    rows = []
    for shape in args.shapes:
        report = report_of(shape, SHAPES.get(shape, 4))
        for detail in SERIES_DETAILS:
            rows.append((shape, SHAPES.get(shape, 4), detail, figures(report, detail)))
    print(table(rows, args.period))
    print(f"\n(one report every {args.period:g} s: {math.floor(MONTH_SECONDS / args.period):,} reports a month)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
