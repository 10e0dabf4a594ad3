"""The /metrics body: the Neuron families rendered once per report, the per-scrape metrics rendered every time.

A scrape body has three parts, in this order (the Neuron metrics fill the first screen):

1. the Neuron families of the served report: rendered at most once per report and format (text 0.0.4 or
   OpenMetrics), on the first scrape that needs them, and kept with a gzip stream compressed up to their end;
2. the ``neuron_exporter_*`` self-metrics, which change between reports (lines read, health, staleness);
3. client_python's ``process_*``/``python_*`` collectors.

Parts 2 and 3 are small and rendered per scrape. With gzip, the first scrape of a report compresses the whole
body in one pass (Prometheus scrapes less often than reports arrive, so that is usually the only scrape of it).
From its second scrape on, part 1 is kept as a gzip header and a raw deflate stream flushed to a byte boundary
(with its CRC-32 and length); a scrape appends the tail's own small deflate stream (ending in the final block)
and the gzip trailer (the CRC continued over the tail), which is one valid gzip member (RFC 1951/1952). A scrape
costs one small render, never the report's families again. Every scrape reads one ``View`` of the state, so its
parts describe the same report, and a report is never half-applied (``state`` swaps whole snapshots).
``collect`` offers the same metrics through client_python's collector interface.

A hostile report's text can be tens of MB (long label values repeated on every series): a text longer than
``KEEP_TEXT_BYTES`` is not kept whole; its compressed head is built family by family, once per report and format
(issue 32), and an uncompressed scrape of it is inflated from that head as the client reads (``InflatingBody``),
so it is rendered once whatever the number of scrapes, and a client that does not read holds a chunk of it, not
a copy (issue 39: 200 such clients made 200 renders and 8.8 GB before).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.exposition import (
    OPENMETRICS_EOF,
    SampleRenderer,
    SeriesTemplates,
    render_metrics,
)
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family
from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics
from neuron_monitor.exporters.prometheus.state import ExporterState, View
from neuron_monitor.schema.stream import StreamStats

if TYPE_CHECKING:
    from neuron_monitor.exporters.prometheus.publish import Publisher

PREFIX = "neuron_exporter"
GZIP_LEVEL = 1  # the text compresses ~15x at level 1; higher levels cost 3-5x the CPU for a few percent
# The rendered Neuron text kept per report and format: every real host's fits (a trn2.48xlarge report renders
# about 0.3 MB, 0.4 MB with --series-detail full); a longer one is rendered per uncompressed scrape instead.
KEEP_TEXT_BYTES = 4 * 1024 * 1024
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # RFC 1952: deflate, no flags, no mtime, OS unknown


def _deflater(size: int, gzip_wrapper: bool = False) -> zlib._Compress:
    """A raw deflate compressor (or a whole gzip member's, with ``gzip_wrapper``) sized for ``size`` bytes: the
    window and hash table need not exceed the input, and setting up a full-size one (256 kB of state) costs more
    than compressing a small tail."""
    window_bits = min(max(size.bit_length(), 9), 15)
    wbits = window_bits + 16 if gzip_wrapper else -window_bits
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, wbits, min(max(window_bits - 7, 1), 8))


INFLATE_INPUT_BYTES = 16 * 1024  # compressed bytes handed to the inflater at a time (bounds its unconsumed tail)


class InflatingBody:
    """An uncompressed /metrics body (a ``server.BodyStream``): the Neuron text inflated on demand from its kept
    compressed head (``RenderedReport.gzip``), then the per-scrape ``tail``. It holds the shared head, an
    inflater (its 32 KiB window) and at most ``INFLATE_INPUT_BYTES`` of input not yet inflated."""

    def __init__(self, head: tuple[bytes, int, int], tail: bytes) -> None:
        data, _crc, text_length = head
        self.length = text_length + len(tail)
        self._data = memoryview(data)[len(GZIP_HEADER) :]
        self._at = 0
        self._pending = b""
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._left = text_length
        self._tail = tail

    def read(self, limit: int) -> bytes:
        while self._left > 0:
            if not self._pending:
                if self._at >= len(self._data):
                    raise ValueError(f"the kept compressed text ended {self._left} bytes early")
                self._pending = bytes(self._data[self._at : self._at + INFLATE_INPUT_BYTES])
                self._at += INFLATE_INPUT_BYTES
            out = self._inflate.decompress(self._pending, min(limit, self._left))
            self._pending = self._inflate.unconsumed_tail
            if out:
                self._left -= len(out)
                return out
        tail = self._tail
        self._tail = tail[limit:]
        return tail[:limit]


class RenderedReport:
    """The Neuron part of the scrape body for one served report (or for none), rendered lazily per format.

    Its text is kept as one ``bytes`` part per family, and only while it is at most ``keep_bytes`` long (every
    real host's is); a longer one (a hostile report's huge label values) is rendered again for each uncompressed
    scrape and let go once sent, and its compressed head is built family by family, so the text is never held
    whole beside the families it came from (issue 32)."""

    def __init__(
        self, view: View, families: Sequence[Family], renderer: SampleRenderer, keep_bytes: int = KEEP_TEXT_BYTES
    ) -> None:
        self.shaped = view.shaped
        self.renderer = renderer
        self.serving = view.serving
        self.families = families
        self.keep_bytes = keep_bytes
        self._parts: dict[bool, list[bytes]] = {}
        self._gzip: dict[bool, tuple[bytes, int, int]] = {}
        self._lock = threading.Lock()
        self.renders = 0
        self._scrapes: set[bool] = set()  # the formats (OpenMetrics or not) served gzip-compressed at least once
        self._large: set[bool] = set()  # the formats whose text is longer than ``keep_bytes`` (not kept)

    def matches(self, view: View) -> bool:
        return self.shaped is view.shaped and self.serving == view.serving

    def _render(self, openmetrics: bool) -> Iterator[bytes]:
        self.renders += 1
        for text in self.renderer.parts(self.families, openmetrics):
            yield text.encode("utf-8")

    def parts(self, openmetrics: bool) -> list[bytes]:
        """The text, one part per family (kept when it is at most ``keep_bytes`` long)."""
        parts = self._parts_upto(openmetrics, None)
        assert parts is not None
        return parts

    def kept_parts(self, openmetrics: bool) -> list[bytes] | None:
        """The text's parts as ``parts`` gives them, or None when it is longer than ``keep_bytes`` (then
        rendering stops there and nothing is held)."""
        return self._parts_upto(openmetrics, self.keep_bytes)

    def _parts_upto(self, openmetrics: bool, limit: int | None) -> list[bytes] | None:
        with self._lock:
            kept = self._parts.get(openmetrics)
            if kept is not None:
                return kept
            if limit is not None and openmetrics in self._large:
                return None
            parts: list[bytes] = []
            size = 0
            for part in self._render(openmetrics):
                size += len(part)
                if size > self.keep_bytes:
                    self._large.add(openmetrics)
                    if limit is not None:
                        return None
                parts.append(part)
            if size <= self.keep_bytes:
                self._parts[openmetrics] = parts
            return parts

    def text(self, openmetrics: bool) -> bytes:
        return b"".join(self.parts(openmetrics))

    def scraped(self, openmetrics: bool) -> bool:
        """Whether this report was served compressed in this format before (and so may be again: then its
        compressed head is kept); marks it served."""
        with self._lock:
            seen = openmetrics in self._scrapes
            self._scrapes.add(openmetrics)
            return seen

    def compressed(self, openmetrics: bool) -> bool:
        """Whether the compressed head of this format is built already (``gzip``: then a scrape only adds its
        tail)."""
        with self._lock:
            return openmetrics in self._gzip

    def gzip(self, openmetrics: bool) -> tuple[bytes, int, int]:
        """(gzip header + raw deflate of the Neuron part, ending on a byte boundary; its CRC-32; its length).
        Built from the kept parts, or else family by family as they are rendered."""
        with self._lock:
            cached = self._gzip.get(openmetrics)
            if cached is not None:
                return cached
            kept = self._parts.get(openmetrics)
            if kept is not None:
                body = b"".join(kept)
                compressor = _deflater(len(body))
                deflated = compressor.compress(body) + compressor.flush(zlib.Z_SYNC_FLUSH)
                cached = (GZIP_HEADER + deflated, zlib.crc32(body), len(body))
            else:
                compressor = _deflater(1 << 15)
                out, crc, length = [GZIP_HEADER], 0, 0
                for part in self._render(openmetrics):
                    out.append(compressor.compress(part))
                    crc = zlib.crc32(part, crc)
                    length += len(part)
                out.append(compressor.flush(zlib.Z_SYNC_FLUSH))
                if length > self.keep_bytes:
                    self._large.add(openmetrics)
                cached = (b"".join(out), crc, length)
            self._gzip[openmetrics] = cached
            return cached


class ExporterCollector(Collector):
    def __init__(self, state: ExporterState, stream_stats: StreamStats | None = None) -> None:
        self.state = state
        self.stream_stats = stream_stats or StreamStats()
        self._rendered: RenderedReport | None = None
        self._lock = threading.Lock()
        self.renderer = SampleRenderer()  # keeps each series' label text from report to report
        self.keep_text_bytes = KEEP_TEXT_BYTES  # the longest Neuron text kept per report and format
        self._kept_self: tuple[tuple[object, ...], str] | None = None  # (what the self-metrics show, their text)
        self._self_templates = SeriesTemplates()  # the self-metrics' lines by their shape (see self_values)
        self.publisher: Publisher | None = None  # when set, scrapes serve its publications (``publish``)

    def collect(self) -> Iterator[Metric]:
        """client_python's collector interface: the same metrics as ``scrape``, from one view of the state."""
        view = self.state.view()
        for family in (*self.served_families(view), *self.self_families(view)):
            yield family.to_metric()

    def serving_view(self) -> View:
        """The view scrapes serve: the publisher's current publication, else the state's newest report."""
        return self.publisher.view() if self.publisher is not None else self.state.view()

    def serving(self) -> tuple[View, RenderedReport]:
        """The view a scrape serves and its rendering: with a publisher, its last complete publication (never
        shaped or rendered here; a stale or absent report renders no Neuron family), else the state's newest
        report, shaped and rendered on first use."""
        publisher = self.publisher
        if publisher is None:
            view = self.state.view()
            return view, self.rendered(view)
        current = publisher.current
        view = self.state.view_of(current.served if current is not None else None)
        if current is not None and current.rendered.matches(view):
            return view, current.rendered
        return view, self.rendered(view)

    def rendered(self, view: View) -> RenderedReport:
        """The cached Neuron part for this view, replaced when the served report (or its freshness) changes."""
        with self._lock:
            cached = self._rendered
            if cached is None or not cached.matches(view):
                cached = RenderedReport(view, self.served_families(view), self.renderer, self.keep_text_bytes)
                self._rendered = cached
            return cached

    def tail(self, view: View, others: Sequence[Collector], openmetrics: bool) -> bytes:
        """The per-scrape part: self-metrics, then ``others``' metrics, then OpenMetrics' EOF. A
        ``ProcessMetrics`` writes its own text (from a template); other collectors go through
        ``render_metrics``."""
        parts: list[str] = [self._self_text(view, openmetrics)]
        for collector in others:
            if isinstance(collector, ProcessMetrics):
                parts.append(collector.text(openmetrics))
            else:
                parts.append(render_metrics(list(collector.collect()), openmetrics))
        if openmetrics:
            parts.append(OPENMETRICS_EOF)
        return "".join(parts).encode("utf-8")

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
        """One /metrics body as the parts that ``body`` joins (shared bytes: the server writes them a chunk at a
        time, so a large body is never copied), or, for a text too long to keep, uncompressed, an
        ``InflatingBody`` that makes it as it is read."""
        view, rendered = self.serving()
        if self.publisher is not None:
            self.publisher.scraped(openmetrics, gzipped)
        tail = self.tail(view, others, openmetrics)
        if not gzipped:
            kept = rendered.kept_parts(openmetrics)
            if kept is not None:
                return [*kept, tail]
            return InflatingBody(rendered.gzip(openmetrics), tail)
        if (
            not rendered.scraped(openmetrics)
            and not rendered.compressed(openmetrics)
            and (parts := rendered.kept_parts(openmetrics)) is not None
        ):
            # usually the only scrape of this report: one pass over it all (a text too long to keep goes family
            # by family into the kept head below instead, and is never held whole)
            text = b"".join(parts)  # a short text: one compress call costs less than one per family
            whole = _deflater(len(text) + len(tail), gzip_wrapper=True)
            return [whole.compress(text) + whole.compress(tail) + whole.flush()]
        head, crc, length = rendered.gzip(openmetrics)
        finish = _deflater(len(tail))
        deflated = finish.compress(tail) + finish.flush()  # Z_FINISH: the stream's final block
        trailer = struct.pack("<II", zlib.crc32(tail, crc), (length + len(tail)) & 0xFFFFFFFF)
        return [head, deflated, trailer]

    def scrape(self, others: Sequence[Collector], openmetrics: bool) -> bytes:
        """The uncompressed /metrics body."""
        return self.body(others, openmetrics, False)

    @staticmethod
    def served_families(view: View) -> Sequence[Family]:
        if view.serving and view.shaped is not None:
            return view.shaped.families
        return ()

    def _self_text(self, view: View, openmetrics: bool) -> str:
        """The self-metrics' text, rebuilt only when something they show changed."""
        stats = self.stream_stats
        key = (
            id(view.snapshot),  # the served report (a publication can follow a report counted earlier)
            view.received_wall,
            view.changes,
            view.serving,
            view.healthy,
            view.interval,
            view.window,
            stats.lines,
            stats.bad_lines,
            stats.oversize_lines,
            openmetrics,
        )
        with self._lock:
            kept = self._kept_self
            if kept is not None and kept[0] == key:
                return kept[1]
        shape, values = self.self_values(view)
        text = self._self_templates.render((shape, openmetrics), values, lambda: self.self_families(view), openmetrics)
        with self._lock:
            self._kept_self = (key, text)
        return text

    def self_values(self, view: View) -> tuple[tuple[object, ...], list[float]]:
        """The fast twin of ``self_families``: (their shape, their sample values in order). The shape names
        every series (which label values each labelled family has, and which families are there), so that one
        template of lines fits every view of that shape; a test holds the two together."""
        state, stats = self.state, self.stream_stats
        bad_input = state.bad_input_counts()
        values: list[float] = [
            1.0,
            view.healthy,
            view.serving,
            state.input_closed,
            stats.lines,
            state.accepted_reports,
            stats.bad_lines - stats.oversize_lines,
            stats.oversize_lines,
            state.rejected_reports,
            *bad_input.values(),
        ]
        snapshot = view.snapshot
        groups = set(state.group_errors_total)
        seen: tuple[str, ...] | None = None
        has_report_time = False
        if snapshot is not None:
            values.append(view.received_wall)
            has_report_time = snapshot.report_time is not None
            if snapshot.report_time is not None:
                values.append(snapshot.report_time)
            values += (snapshot.runtimes, view.shaped.series if view.shaped else 0)
            seen = tuple(sorted(snapshot.groups_seen))
            failed = snapshot.groups_failed
            values += [0.0 if g in failed else 1.0 for g in seen]
            groups |= snapshot.groups_seen
        ordered = tuple(sorted(groups))
        errors = state.group_errors_total
        values += (view.interval, view.window, *(errors.get(g, 0) for g in ordered))
        return (tuple(bad_input), seen, has_report_time, ordered), values

    def self_families(self, view: View) -> list[Family]:
        """The ``neuron_exporter_*`` metrics of this view (the careful twin of ``self_values``)."""
        state, stats = self.state, self.stream_stats
        out: list[Family] = []

        def add(name: str, kind: str, help_text: str, value: float) -> None:
            out.append(Family(f"{PREFIX}_{name}", kind, help_text, (), {(): float(value)}))

        def add_labelled(name: str, kind: str, help_text: str, label: str, values: dict[str, float]) -> None:
            samples: dict[tuple[str, ...], float] = {(k,): float(v) for k, v in values.items()}
            out.append(Family(f"{PREFIX}_{name}", kind, help_text, (label,), samples))

        out.append(
            Family(f"{PREFIX}_build", INFO, "neuron-monitor-prometheus version", ("version",), {(__version__,): 1.0})
        )
        add(
            "up",
            GAUGE,
            "1 while a report newer than the staleness limit is served and stdin is open, else 0",
            view.healthy,
        )
        add(
            "serving",
            GAUGE,
            "1 while Neuron metrics are served (the newest report is within the staleness limit), else 0",
            view.serving,
        )
        add("input_closed", GAUGE, "1 after stdin reached end of file", state.input_closed)
        add("input_lines", COUNTER, "Lines read from stdin", stats.lines)
        add("reports", COUNTER, "Reports accepted and counted", state.accepted_reports)
        add_labelled(
            "bad_lines",
            COUNTER,
            "Input lines skipped, by reason",
            "reason",
            {
                "invalid": stats.bad_lines - stats.oversize_lines,
                "oversize": stats.oversize_lines,
                "malformed_report": state.rejected_reports,
            },
        )
        add_labelled(
            "bad_input",
            COUNTER,
            "Values dropped (negative, non_finite or absurd counts) or label values truncated (label_too_long)",
            "reason",
            state.bad_input_counts(),
        )
        snapshot = view.snapshot
        if snapshot is not None:
            add(
                "last_report_timestamp_seconds",
                GAUGE,
                "Wall-clock time the newest accepted report was received",
                view.received_wall,
            )
            if snapshot.report_time is not None:
                add(
                    "last_report_time_seconds",
                    GAUGE,
                    "report_time written by the daemon into the newest accepted report",
                    snapshot.report_time,
                )
            add("runtimes", GAUGE, "Neuron runtimes in the newest report", snapshot.runtimes)
            add("series", GAUGE, "Neuron series built from the newest report", view.shaped.series if view.shaped else 0)
            add_labelled(
                "group_success",
                GAUGE,
                "1 if no instance of the metric group reported an error in the newest report, else 0",
                "group",
                {g: 0.0 if g in snapshot.groups_failed else 1.0 for g in sorted(snapshot.groups_seen)},
            )
        add(
            "report_interval_seconds",
            GAUGE,
            "Report interval (from the reports' report_time and periods)",
            view.interval,
        )
        add(
            "stale_after_seconds",
            GAUGE,
            "Age after which the newest report is stale and Neuron series are withdrawn",
            view.window,
        )
        groups = set(state.group_errors_total)
        if snapshot is not None:
            groups |= snapshot.groups_seen
        add_labelled(  # 0 for every group seen, so rate() has a series before the first error
            "group_errors",
            COUNTER,
            "Collections of a metric group that reported an error (runtime entry errors as group=runtime)",
            "group",
            {g: state.group_errors_total.get(g, 0) for g in sorted(groups)},
        )
        return out
