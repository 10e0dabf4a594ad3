"""Benchmark: neuron-monitor-otlp's CPU per report beside neuron-monitor-prometheus's, in one run.

Both take the same trn2.48xlarge report lines (16 runtimes, 4 logical cores each, as bench_prometheus.py):

- OTLP: parse the line, count and shape it (the Prometheus exporter's builder), convert to OTLP points, encode the
  request (protobuf; and OTLP/JSON) and gzip it: everything up to the bytes on the wire;
- Prometheus: parse the line, ingest it, and serve one gzip-compressed scrape of it (a scrape per report: the
  exporter's busiest steady state).

Prints the medians of repeated runs (CPU ms per report) and the ratio OTLP / Prometheus. Nothing passes or fails.

    python3 bench/bench_otlp.py [--reports 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_prometheus import report_lines  # noqa: E402
from bench.inprocess import median_cpu_ms  # noqa: E402
from neuron_monitor.exporters.otlp.jsonwire import JsonEncoder  # noqa: E402
from neuron_monitor.exporters.otlp.model import ReportConverter  # noqa: E402
from neuron_monitor.exporters.otlp.naming import NAMERS, PROMETHEUS  # noqa: E402
from neuron_monitor.exporters.otlp.pipeline import Encoder, ReportPipeline  # noqa: E402
from neuron_monitor.exporters.otlp.resource import ResourceBuilder  # noqa: E402
from neuron_monitor.exporters.otlp.wire import ProtobufEncoder  # noqa: E402
from neuron_monitor.exporters.prometheus.collector import ExporterCollector  # noqa: E402
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions  # noqa: E402
from neuron_monitor.exporters.prometheus.state import ExporterState  # noqa: E402


def otlp_run(lines: list[bytes], json: bool) -> tuple[float, int, int]:
    encoder: Encoder = JsonEncoder(4 << 20) if json else ProtobufEncoder(4 << 20)
    pipeline = ReportPipeline(
        ExporterState(ShapeOptions()),
        ReportConverter(NAMERS[PROMETHEUS]),
        encoder,
        ResourceBuilder("0", "bench-host"),
        ("neuron-monitor-otlp", "0"),
        True,
    )
    sizes = [0]

    def run() -> None:
        for line in lines:
            requests = pipeline.requests(orjson.loads(line))
            sizes[0] = sum(len(r.body) for r in requests)

    return (
        median_cpu_ms(run, ARGS.repeats) / len(lines),
        sizes[0],
        pipeline.stats.points // max(pipeline.stats.reports, 1),
    )


def prometheus_run(lines: list[bytes]) -> float:
    state = ExporterState()
    collector = ExporterCollector(state)

    def run() -> None:
        for line in lines:
            state.apply(orjson.loads(line))
            collector.body([], False, True)

    return median_cpu_ms(run, ARGS.repeats) / len(lines)


ARGS = argparse.Namespace(repeats=5)


def main() -> None:
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reports", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    ARGS = p.parse_args()
    lines = report_lines(ARGS.reports)
    prom_a = prometheus_run(lines)
    otlp_pb, pb_bytes, points = otlp_run(lines, json=False)
    otlp_json, json_bytes, _ = otlp_run(lines, json=True)
    prom_b = prometheus_run(lines)
    prom = (prom_a + prom_b) / 2
    print(f"trn2.48xlarge report, 16 runtimes: {points} points per report")
    print(
        f"neuron-monitor-prometheus ingest + one gzip scrape: {prom:.2f} ms CPU per report ({prom_a:.2f}, {prom_b:.2f})"
    )
    print(f"neuron-monitor-otlp http/protobuf + gzip:           {otlp_pb:.2f} ms CPU per report ({pb_bytes} bytes)")
    print(f"neuron-monitor-otlp http/json + gzip:               {otlp_json:.2f} ms CPU per report ({json_bytes} bytes)")
    print(f"ratio OTLP protobuf / Prometheus: {otlp_pb / prom:.2f}; OTLP JSON / Prometheus: {otlp_json / prom:.2f}")


if __name__ == "__main__":
    main()
