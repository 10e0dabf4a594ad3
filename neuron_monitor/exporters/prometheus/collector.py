"""The client_python custom collector: fresh metric families from the newest snapshot at every scrape.

One ``collect`` (or ``scrape``) call reads one ``View`` of the exporter state, so the Neuron families and the
exporter's own metrics of a scrape always describe the same report. ``scrape`` renders the Neuron families with
the fast encoder of ``exposition`` (byte-identical to client_python's). The Neuron families are left out while
the data is stale (see ``state``); the ``neuron_exporter_*`` self-metrics are always there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.exposition import render
from neuron_monitor.exporters.prometheus.families import Family
from neuron_monitor.exporters.prometheus.state import ExporterState, View
from neuron_monitor.exporters.stream import StreamStats

PREFIX = "neuron_exporter"


class ExporterCollector(Collector):
    def __init__(self, state: ExporterState, stream_stats: StreamStats | None = None) -> None:
        self.state = state
        self.stream_stats = stream_stats or StreamStats()

    def collect(self) -> Iterator[Metric]:
        """client_python's collector interface: fresh families from one view of the state."""
        view = self.state.view()
        yield from self.self_metrics(view)
        for family in self.served_families(view):
            yield family.to_metric()

    def scrape(self, others: Sequence[Collector], openmetrics: bool) -> bytes:
        """The /metrics body: ``others`` (process, GC, platform), self-metrics, then the Neuron families."""
        view = self.state.view()
        metrics = [m for c in others for m in c.collect()]
        metrics.extend(self.self_metrics(view))
        return render(metrics, self.served_families(view), openmetrics)

    @staticmethod
    def served_families(view: View) -> Sequence[Family]:
        if view.serving and view.shaped is not None:
            return view.shaped.families
        return ()

    def self_metrics(self, view: View) -> Iterator[Metric]:
        state, stats = self.state, self.stream_stats
        yield InfoMetricFamily(f"{PREFIX}_build", "neuron-monitor-prometheus version", {"version": __version__})
        yield GaugeMetricFamily(
            f"{PREFIX}_up",
            "1 while a report newer than the staleness limit is served and stdin is open, else 0",
            value=1.0 if view.healthy else 0.0,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_serving",
            "1 while Neuron metrics are served (the newest report is within the staleness limit), else 0",
            value=1.0 if view.serving else 0.0,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_input_closed", "1 after stdin reached end of file", value=1.0 if state.input_closed else 0.0
        )
        yield CounterMetricFamily(f"{PREFIX}_input_lines", "Lines read from stdin", value=stats.lines)
        yield CounterMetricFamily(
            f"{PREFIX}_reports",
            "Reports accepted and served",
            value=max(stats.reports - state.rejected_reports, 0),
        )
        bad = CounterMetricFamily(f"{PREFIX}_bad_lines", "Input lines skipped, by reason", labels=["reason"])
        bad.add_metric(["invalid"], stats.bad_lines - stats.oversize_lines)
        bad.add_metric(["oversize"], stats.oversize_lines)
        bad.add_metric(["malformed_report"], state.rejected_reports)
        yield bad
        if view.snapshot is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_last_report_timestamp_seconds",
                "Wall-clock time the newest accepted report was received",
                value=view.received_wall,
            )
            if view.snapshot.report_time is not None:
                yield GaugeMetricFamily(
                    f"{PREFIX}_last_report_time_seconds",
                    "report_time written by the daemon into the newest accepted report",
                    value=view.snapshot.report_time,
                )
            yield GaugeMetricFamily(
                f"{PREFIX}_runtimes", "Neuron runtimes in the newest report", value=view.snapshot.runtimes
            )
            yield GaugeMetricFamily(
                f"{PREFIX}_series",
                "Neuron series built from the newest report",
                value=view.shaped.series if view.shaped else 0,
            )
            success = GaugeMetricFamily(
                f"{PREFIX}_group_success",
                "1 if no instance of the metric group reported an error in the newest report, else 0",
                labels=["group"],
            )
            for group in sorted(view.snapshot.groups_seen):
                success.add_metric([group], 0.0 if group in view.snapshot.groups_failed else 1.0)
            yield success
        yield GaugeMetricFamily(
            f"{PREFIX}_report_interval_seconds", "Estimated interval between reports", value=view.interval
        )
        errors = CounterMetricFamily(
            f"{PREFIX}_group_errors",
            "Collections of a metric group that reported an error (runtime entry errors as group=runtime)",
            labels=["group"],
        )
        groups = set(state.group_errors_total)
        if view.snapshot is not None:
            groups |= view.snapshot.groups_seen
        for group in sorted(groups):  # 0 for every group seen, so rate() has a series before the first error
            errors.add_metric([group], state.group_errors_total.get(group, 0))
        yield errors
