"""Shared by the OTLP tests: the exporter in-process (pipeline + encoders) and reports that change over time."""

from __future__ import annotations

import gzip
import json as jsonlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from neuron_monitor.exporters.otlp.jsonwire import JsonEncoder
from neuron_monitor.exporters.otlp.model import ReportConverter
from neuron_monitor.exporters.otlp.naming import NAMERS, PROMETHEUS
from neuron_monitor.exporters.otlp.pipeline import Encoder, ReportPipeline
from neuron_monitor.exporters.otlp.resource import ResourceBuilder
from neuron_monitor.exporters.otlp.wire import ProtobufEncoder
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.schema.spec import registry
from tests.exporters.prometheus.prom_reports import runtime, trn2_report


def pipeline(
    naming: str = PROMETHEUS, json: bool = False, max_bytes: int = 4 << 20, gzip_bodies: bool = False
) -> ReportPipeline:
    encoder: Encoder = JsonEncoder(max_bytes) if json else ProtobufEncoder(max_bytes)
    return ReportPipeline(
        ExporterState(ShapeOptions()),
        ReportConverter(NAMERS[naming]),
        encoder,
        ResourceBuilder("9.9.9", "node-a.example", "node-a"),
        ("neuron-monitor-otlp", "9.9.9"),
        gzip_bodies,
    )


def decode(body: bytes, json: bool = False) -> ExportMetricsServiceRequest:
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    request = ExportMetricsServiceRequest()
    if json:
        json_format.Parse(body.decode(), request)
    else:
        request.ParseFromString(body)
    return request


def trn2(
    i: int, runtimes: int = 16, completed_base: int = 100, tags: str = "job", pid_base: int = 1000
) -> dict[str, Any]:
    """The i-th report of a trn2.48xlarge with ``runtimes`` runtimes of 4 logical cores each (1 s periods)."""
    rts = [
        runtime(
            pid_base + d,
            f"{tags}-{d:02d}",
            [4 * d + c for c in range(4)],
            completed=completed_base + i + d,
            generic_errors=i % 3,
            utilization=40.0 + (i + d) % 50,
        )
        for d in range(runtimes)
    ]
    report = trn2_report(rts, report_time=1.7e9 + i, ecc=i % 2)
    return orjson.loads(orjson.dumps(report))  # type: ignore[no-any-return]


def record_lines(workdir: Path, reports: int, runtimes: int = 16) -> list[bytes]:
    """``reports`` report lines of the real daemon on a simulated trn2.48xlarge (``runtimes`` runtimes, every
    group, 1 s period)."""
    conf = workdir / "monitor.conf"
    conf.write_text(
        jsonlib.dumps(
            {
                "period": "1s",
                "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": t} for t in registry().runtime]}],
                "system_metrics": [{"type": t} for t in registry().system],
            }
        )
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--no-imds", "--simulate",
         "trn2.48xlarge", "--sim-runtimes", str(runtimes), "--seed", "7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert daemon.stdout is not None
    got: list[bytes] = []
    try:
        while len(got) < reports:
            line = daemon.stdout.readline()
            assert line, "the daemon stopped"
            if line.strip():
                got.append(line)
    finally:
        daemon.terminate()
        daemon.wait(30)
    return got


def self_metric_names(report_line: bytes) -> frozenset[str]:
    """The sample names of the exporter's self-metrics that the collector makes (``ExporterCollector.self_families``);
    other ``neuron_exporter_*`` series of a scrape belong to its HTTP front (connections), which a push has not."""
    state = ExporterState(ShapeOptions())
    state.apply(orjson.loads(report_line))
    return frozenset(f.sample_name for f in ExporterCollector(state).self_families(state.view()))
