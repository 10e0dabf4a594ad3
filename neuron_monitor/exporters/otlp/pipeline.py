"""One report line's way to requests: count and shape (the Prometheus exporter's builder), convert, encode, compress.

``ReportPipeline.requests(report)`` returns the report's requests (one unless it passes the size cap) or raises
``MalformedReport`` (nothing counted, as in the Prometheus exporter). Runtime entries past ``MAX_RUNTIMES`` are
left out and counted, as there.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from neuron_monitor.exporters.otlp.buffer import Request
from neuron_monitor.exporters.otlp.model import MetricOut, Pairs, ReportConverter
from neuron_monitor.exporters.otlp.resource import ResourceBuilder
from neuron_monitor.exporters.prometheus.snapshot import SnapshotBuilder
from neuron_monitor.exporters.stream import MAX_RUNTIMES

DEFAULT_PERIOD = 5.0  # neuron-monitor's default period, for a report that names none
GZIP_LEVEL = 1  # a trn2.48xlarge request compresses about 12x at level 1; higher levels cost more CPU for little


class Encoder(Protocol):
    content_type: str

    def encode(
        self, resource: Pairs, scope: tuple[str, str], metrics: list[MetricOut], time_ns: int
    ) -> list[tuple[bytes, int]]: ...


@dataclass
class PipelineStats:
    reports: int = 0
    points: int = 0
    runtimes_left_out: int = 0
    oversize_reports: int = 0  # reports split into several requests


def gzip_bytes(data: bytes) -> bytes:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


class ReportPipeline:
    def __init__(
        self,
        builder: SnapshotBuilder,
        converter: ReportConverter,
        encoder: Encoder,
        resource: ResourceBuilder,
        scope: tuple[str, str],
        gzip: bool,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.builder = builder
        self.converter = converter
        self.encoder = encoder
        self.resource = resource
        self.scope = scope
        self.gzip = gzip
        self.wall_clock = wall_clock
        self.stats = PipelineStats()
        self.period = DEFAULT_PERIOD  # the newest report's cadence (its shortest group period)

    def requests(self, report: dict[str, Any]) -> list[Request]:
        runtimes = report.get("neuron_runtime_data")
        if isinstance(runtimes, list) and len(runtimes) > MAX_RUNTIMES:
            self.stats.runtimes_left_out += len(runtimes) - MAX_RUNTIMES
            report["neuron_runtime_data"] = runtimes[:MAX_RUNTIMES]
        snapshot = self.builder.ingest(report)  # raises MalformedReport: nothing counted
        read = snapshot.read
        info = read.instance_info if read is not None else None
        shaped = snapshot.shaped()  # raises MalformedReport
        stamp = snapshot.report_time
        if stamp is None or not (0 < stamp < 1e11):
            stamp = self.wall_clock()
        time_ns = int(stamp * 1e9)
        if snapshot.min_period > 0:
            self.period = snapshot.min_period
        metrics = self.converter.convert(shaped.families, time_ns, self.period)
        bodies = self.encoder.encode(self.resource.attributes(info), self.scope, metrics, time_ns)
        number = self.stats.reports
        self.stats.reports += 1
        if len(bodies) > 1:
            self.stats.oversize_reports += 1
        out = [Request(gzip_bytes(body) if self.gzip else body, n, number, len(bodies)) for body, n in bodies]
        self.stats.points += sum(r.points for r in out)
        return out
