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
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.exposition import (
    OPENMETRICS_EOF,
    MetricTable,
    Reading,
    Row,
    SampleRenderer,
    render_metrics,
)
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family
from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics
from neuron_monitor.exporters.prometheus.server import CLOSE_REASONS, HTTPFront
from neuron_monitor.exporters.prometheus.snapshot import Snapshot
from neuron_monitor.exporters.prometheus.state import ExporterState, View
from neuron_monitor.schema.stream import StreamStats

if TYPE_CHECKING:
    from neuron_monitor.exporters.prometheus.publish import Publisher

PREFIX = "neuron_exporter"
GZIP_LEVEL = 1  # the text compresses ~15x at level 1; higher levels cost 3-5x the CPU for a few percent
# The rendered Neuron text kept per report and format: every real host's fits (a trn2.48xlarge report renders
# about 0.3 MB, 0.4 MB with --series-detail full); a longer one is rendered per uncompressed scrape instead.
KEEP_TEXT_BYTES = 4 * 1024 * 1024
_BUILD: dict[tuple[str, ...], float] = {(__version__,): 1.0}  # neuron_exporter_build_info: one sample
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # RFC 1952: deflate, no flags, no mtime, OS unknown


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
        self.front: HTTPFront | None = None  # the HTTP front serving this collector (its connection counts)
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
        parts: list[str] = [SELF_METRICS.text(self._seen(view), openmetrics)]
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

    def self_families(self, view: View) -> list[Family]:
        """The ``neuron_exporter_*`` metrics of this view (the careful twin of the text ``tail`` writes)."""
        return SELF_METRICS.families(self._seen(view))

    def _seen(self, view: View) -> Seen:
        return Seen(view, self.state, self.stream_stats, self.front)
