"""One report line's way to requests: count and shape, convert, encode, compress.

``ReportPipeline.requests(report)`` hands the report to the Prometheus exporter's own ``ExporterState`` (its
counter ledger, label sets, series budget and limits, and the runtime entries past ``MAX_RUNTIMES`` left out and
counted), then converts what a scrape would serve at that moment: the report's families and the exporter's own
``neuron_exporter_*`` families (``ExporterCollector.self_families``: reports, lines, group success and errors,
runtimes, series, health), so the dashboards' and alerts' exporter series exist on pushed data too. A malformed
report is counted there and sends nothing (``requests`` returns an empty list).
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
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.schema.read import read_report
from neuron_monitor.schema.stream import StreamStats

DEFAULT_PERIOD = 5.0  # neuron-monitor's default period, for a report that names none
GZIP_LEVEL = 1  # a trn2.48xlarge request compresses about 12x at level 1; higher levels cost more CPU for little


class Encoder(Protocol):
    content_type: str

    def encode(
        self, resource: Pairs, scope: tuple[str, str], metrics: list[MetricOut], time_ns: int
    ) -> list[tuple[bytes, int]]: ...


@dataclass
class PipelineStats:
    reports: int = 0  # reports turned into requests
    points: int = 0
    malformed_reports: int = 0  # counted by the exporter state and not sent
    oversize_reports: int = 0  # reports split into several requests


def gzip_bytes(data: bytes) -> bytes:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


class ReportPipeline:
    def __init__(
        self,
        state: ExporterState,
        converter: ReportConverter,
        encoder: Encoder,
        resource: ResourceBuilder,
        scope: tuple[str, str],
        gzip: bool,
        stream_stats: StreamStats | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self.collector = ExporterCollector(state, stream_stats)
        self.converter = converter
        self.encoder = encoder
        self.resource = resource
        self.scope = scope
        self.gzip = gzip
        self.wall_clock = wall_clock
        self.stats = PipelineStats()
        self.period = DEFAULT_PERIOD  # the newest report's cadence (its shortest group period)

    def requests(self, report: dict[str, Any]) -> list[Request]:
        """The report's requests; [] for a malformed report (counted by the state as the scrape path counts it)."""
        info = read_report(report).instance_info
        rejected = self.state.rejected_reports
        if not self.state.apply(report):
            self.stats.malformed_reports += 1
            return []
        view = self.state.view()
        if self.state.rejected_reports != rejected or view.snapshot is None or view.shaped is None:
            self.stats.malformed_reports += 1  # shaping failed: the previous report would be served again
            return []
        snapshot = view.snapshot
        stamp = snapshot.report_time
        if stamp is None or not (0 < stamp < 1e11):
            stamp = self.wall_clock()
        time_ns = int(stamp * 1e9)
        if snapshot.min_period > 0:
            self.period = snapshot.min_period
        families = [*view.shaped.families, *self.collector.self_families(view)]
        metrics = self.converter.convert(families, time_ns, self.period)
        bodies = self.encoder.encode(self.resource.attributes(info), self.scope, metrics, time_ns)
        number = self.stats.reports
        self.stats.reports += 1
        if len(bodies) > 1:
            self.stats.oversize_reports += 1
        out = [Request(gzip_bytes(body) if self.gzip else body, n, number, len(bodies)) for body, n in bodies]
        self.stats.points += sum(r.points for r in out)
        return out

    def closed(self) -> list[Request]:
        """At end of input: one last request with the exporter's own metrics only (``neuron_exporter_up`` 0,
        ``neuron_exporter_input_closed`` 1), at the wall-clock time, as a scrape after EOF would show them."""
        self.state.close_input()
        view = self.state.view()
        time_ns = int(self.wall_clock() * 1e9)
        metrics = self.converter.convert(self.collector.self_families(view), time_ns, self.period)
        info = None
        bodies = self.encoder.encode(self.resource.attributes(info, keep=True), self.scope, metrics, time_ns)
        number = self.stats.reports
        self.stats.reports += 1
        out = [Request(gzip_bytes(body) if self.gzip else body, n, number, len(bodies)) for body, n in bodies]
        self.stats.points += sum(r.points for r in out)
        return out
