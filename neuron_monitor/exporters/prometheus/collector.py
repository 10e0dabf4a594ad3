"""The /metrics body: the served publication, then the per-scrape tail; and the exporter's own metrics table.

A scrape body has three parts, in this order (the Neuron metrics fill the first screen):

1. the Neuron families of the served report: its ``publish.Publication``, rendered (and compressed) at most
   once per report and format, shared by every scrape of it;
2. the ``neuron_exporter_*`` self-metrics (``SELF_METRICS``: one row per family), which change between reports
   (lines read, health, staleness, connections closed);
3. the ``process_*``/``python_*`` metrics client_python's collectors would serve (``process_metrics``).

Parts 2 and 3 are small and written per scrape from templates of their lines (``exposition.MetricTable``); the
publication joins them to part 1 (``Publication.body``: uncompressed, or as one gzip member). Every scrape reads
one ``View``, so its parts describe the same report, and a report is never half-applied (``state`` swaps whole
snapshots). ``collect`` offers the same metrics through client_python's collector interface.

Adding a self-metric is adding one row to ``SELF_METRICS`` (name, kind, help, how to read it from a scrape's
``Seen``, label names); its text, its careful twin and OTLP's copy of it follow from the row.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.exposition import (
    OPENMETRICS_EOF,
    MetricTable,
    Reading,
    Row,
    render_metrics,
)
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family
from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics
from neuron_monitor.exporters.prometheus.publish import InflatingBody, Publisher, served_families
from neuron_monitor.exporters.prometheus.server import CLOSE_REASONS, HTTPFront
from neuron_monitor.exporters.prometheus.snapshot import Shaped, Snapshot
from neuron_monitor.exporters.prometheus.state import ExporterState, View
from neuron_monitor.schema.stream import StreamStats

PREFIX = "neuron_exporter"
_BUILD: dict[tuple[str, ...], float] = {(__version__,): 1.0}  # neuron_exporter_build_info: one sample


class Seen(NamedTuple):
    """What one scrape's self-metrics read: the served view, the state, the input's counts and the HTTP front
    (None where there is none: then the connection counts are left out)."""

    view: View
    state: ExporterState
    stats: StreamStats
    front: HTTPFront | None


def _of_report(read: Callable[[Snapshot, View], Reading]) -> Callable[[Seen], Reading]:
    """A row served only while there is a served report (left out before the first)."""
    return lambda s: None if s.view.snapshot is None else read(s.view.snapshot, s.view)


def _group_errors(s: Seen) -> dict[tuple[str, ...], float]:
    """Every group that ever reported an error or is in the served report (0 until its first error)."""
    errors = s.state.group_errors_total
    groups = set(errors)
    if s.view.snapshot is not None:
        groups |= s.view.snapshot.groups_seen
    return {(g,): float(errors.get(g, 0)) for g in sorted(groups)}


# The exporter's own metrics, in the order scrapes serve them: one row per family (name, kind, help, how to read
# it from a scrape's ``Seen``, label names). A row that reads None is left out of that scrape.
SELF_METRICS: MetricTable[Seen] = MetricTable(
    (
        Row(f"{PREFIX}_build", INFO, "neuron-monitor-prometheus version", lambda s: _BUILD, ("version",)),
        Row(
            f"{PREFIX}_up",
            GAUGE,
            "1 while a report newer than the staleness limit is served and stdin is open, else 0",
            lambda s: s.view.healthy,
        ),
        Row(
            f"{PREFIX}_serving",
            GAUGE,
            "1 while Neuron metrics are served (the newest report is within the staleness limit), else 0",
            lambda s: s.view.serving,
        ),
        Row(f"{PREFIX}_input_closed", GAUGE, "1 after stdin reached end of file", lambda s: s.state.input_closed),
        Row(f"{PREFIX}_input_lines", COUNTER, "Lines read from stdin", lambda s: s.stats.lines),
        Row(f"{PREFIX}_reports", COUNTER, "Reports accepted and counted", lambda s: s.state.accepted_reports),
        Row(
            f"{PREFIX}_bad_lines",
            COUNTER,
            "Input lines skipped, by reason",
            lambda s: {
                ("invalid",): s.stats.bad_lines - s.stats.oversize_lines,
                ("oversize",): s.stats.oversize_lines,
                ("malformed_report",): s.state.rejected_reports,
            },
            ("reason",),
        ),
        Row(
            f"{PREFIX}_bad_input",
            COUNTER,
            "Values dropped (negative, non_finite or absurd counts) or label values truncated (label_too_long)",
            lambda s: {(reason,): n for reason, n in s.state.bad_input_counts().items()},
            ("reason",),
        ),
        Row(
            f"{PREFIX}_last_report_timestamp_seconds",
            GAUGE,
            "Wall-clock time the newest accepted report was received",
            _of_report(lambda snapshot, view: view.received_wall),
        ),
        Row(
            f"{PREFIX}_last_report_time_seconds",
            GAUGE,
            "report_time written by the daemon into the newest accepted report",
            _of_report(lambda snapshot, view: snapshot.report_time),
        ),
        Row(
            f"{PREFIX}_runtimes",
            GAUGE,
            "Neuron runtimes in the newest report",
            _of_report(lambda snapshot, view: snapshot.runtimes),
        ),
        Row(
            f"{PREFIX}_series",
            GAUGE,
            "Neuron series built from the newest report",
            _of_report(lambda snapshot, view: view.shaped.series if view.shaped else 0),
        ),
        Row(
            f"{PREFIX}_group_success",
            GAUGE,
            "1 if no instance of the metric group reported an error in the newest report, else 0",
            _of_report(
                lambda snapshot, view: {
                    (g,): 0.0 if g in snapshot.groups_failed else 1.0 for g in sorted(snapshot.groups_seen)
                }
            ),
            ("group",),
        ),
        Row(
            f"{PREFIX}_report_interval_seconds",
            GAUGE,
            "Report interval (from the reports' report_time and periods)",
            lambda s: s.view.interval,
        ),
        Row(
            f"{PREFIX}_stale_after_seconds",
            GAUGE,
            "Age after which the newest report is stale and Neuron series are withdrawn",
            lambda s: s.view.window,
        ),
        Row(  # 0 for every group seen, so rate() has a series before the first error
            f"{PREFIX}_group_errors",
            COUNTER,
            "Collections of a metric group that reported an error (runtime entry errors as group=runtime)",
            _group_errors,
            ("group",),
        ),
        Row(  # read on the loop thread, where the front counts every close
            f"{PREFIX}_connections_closed",
            COUNTER,
            "Connections the exporter closed, by reason (write_timeout: a response not read in time)",
            lambda s: None if s.front is None else {(r,): s.front.closes.get(r, 0) for r in CLOSE_REASONS},
            ("reason",),
        ),
    )
)


class ExporterCollector(Collector):
    """The /metrics body: the publication a scrape serves (``publisher``), then the per-scrape tail."""

    def __init__(self, state: ExporterState, stream_stats: StreamStats | None = None) -> None:
        self.state = state
        self.stream_stats = stream_stats or StreamStats()
        self.front: HTTPFront | None = None  # the HTTP front serving this collector (its connection counts)
        self.publisher = Publisher(state)  # what scrapes serve (attached to the event loop by the CLI)
        self._last_tail: tuple[list[str], bytes] | None = None  # the last tail's texts and its bytes
        # the served report, its shaping and the other figures the self-metrics read, and their text (``self_text``)
        self._last_self: tuple[Snapshot | None, Shaped | None, tuple[object, ...], str] | None = None

    def collect(self) -> Iterator[Metric]:
        """client_python's collector interface: the same metrics as ``scrape``, from one view of the state."""
        view = self.state.view()
        for family in (*served_families(view), *self.self_families(view)):
            yield family.to_metric()

    def serving_view(self) -> View:
        """The view scrapes serve (``Publisher.view``)."""
        return self.publisher.view()

    def tail(self, view: View, others: Sequence[Collector], openmetrics: bool) -> bytes:
        """The per-scrape part: self-metrics, then ``others``' metrics, then OpenMetrics' EOF. A
        ``ProcessMetrics`` writes its own text (from a template); other collectors go through
        ``render_metrics``."""
        parts: list[str] = [self.self_text(view, openmetrics)]
        for collector in others:
            if isinstance(collector, ProcessMetrics):
                parts.append(collector.text(openmetrics))
            else:
                parts.append(render_metrics(list(collector.collect()), openmetrics))
        if openmetrics:
            parts.append(OPENMETRICS_EOF)
        last = self._last_tail
        if last is not None and len(last[0]) == len(parts) and all(map(operator.is_, last[0], parts)):
            return last[1]  # the tables gave their last texts again: the same tail object (its gzip is kept too)
        tail = "".join(parts).encode("utf-8")
        self._last_tail = (parts, tail)
        return tail

    def body(self, others: Sequence[Collector], openmetrics: bool, gzipped: bool) -> bytes:
        """One /metrics body, gzip-compressed (one gzip member) when ``gzipped``."""
        body = self.body_parts(others, openmetrics, gzipped)
        if isinstance(body, list):
            return b"".join(body)
        out = []
        while chunk := body.read(1 << 20):
            out.append(chunk)
        return b"".join(out)

    def body_parts(self, others: Sequence[Collector], openmetrics: bool, gzipped: bool) -> list[bytes] | InflatingBody:
        """One /metrics body as ``Publication.body`` gives it: the served publication, then this scrape's tail
        (the server writes the parts a chunk at a time, so a large body is never copied)."""
        view, publication = self.publisher.serving()
        self.publisher.scraped(openmetrics, gzipped)
        return publication.body(openmetrics, gzipped, self.tail(view, others, openmetrics))

    def scrape(self, others: Sequence[Collector], openmetrics: bool) -> bytes:
        """The uncompressed /metrics body."""
        return self.body(others, openmetrics, False)

    def self_text(self, view: View, openmetrics: bool) -> str:
        """``SELF_METRICS.text`` of this view (its plain twin), given again without reading the rows while nothing
        they read has changed: the served report and its view's figures, the state's change count (every count
        the rows show moves it), the input's line counts, stdin's end and the connections closed. The same text
        object as last time then, which lets the scrape reuse its whole tail."""
        stats, front = self.stream_stats, self.front
        key = (  # plain values (the served report and its shaping are compared by identity below)
            openmetrics,
            id(self.state),
            id(stats),
            view.serving,
            view.healthy,
            view.received_wall,
            view.interval,
            view.window,
            view.changes,
            self.state.changes,
            self.state.input_closed,
            stats.lines,
            stats.bad_lines,
            stats.oversize_lines,
            None if front is None else tuple(front.closes.items()),
        )
        last = self._last_self
        if last is not None and last[0] is view.snapshot and last[1] is view.shaped and last[2] == key:
            return last[3]
        text = SELF_METRICS.text(self._seen(view), openmetrics)
        self._last_self = (view.snapshot, view.shaped, key, text)
        return text

    def self_families(self, view: View) -> list[Family]:
        """The ``neuron_exporter_*`` metrics of this view (the careful twin of the text ``tail`` writes)."""
        return SELF_METRICS.families(self._seen(view))

    def _seen(self, view: View) -> Seen:
        return Seen(view, self.state, self.stream_stats, self.front)
