"""What a scrape serves: the last complete rendering of one report, prepared in small steps on the event loop.

A ``Publication`` is the one rendering of a served report: its Neuron families as text in each format asked for
(text 0.0.4, OpenMetrics), and each such text gzip-compressed, built once and shared by every scrape of that
report (the only cache of served output). A scrape adds its own tail (the self-metrics and process metrics,
``collector``) and gets its body from ``Publication.body``:

- uncompressed: the kept text's parts (one per family), then the tail;
- gzip, first scrape of a report in that format: the whole body compressed in one pass (Prometheus scrapes less
  often than reports arrive, so that is usually the only scrape of it);
- gzip, from the second scrape on (or once the publisher compressed it ahead): the text kept as a gzip header and a
  raw deflate stream flushed to a byte boundary (with its CRC-32 and length); a scrape appends the tail's own
  small deflate stream (ending in the final block) and the gzip trailer (the CRC continued over the tail), which
  is one valid gzip member (RFC 1951/1952). A scrape costs one small render, never the report's families again.

A hostile report's text can be tens of MB (long label values repeated on every series): a text longer than
``KEEP_TEXT_BYTES`` is not kept whole; its compressed head is built family by family, once per report and format
(issue 32), and an uncompressed scrape of it is inflated from that head as the client reads (``InflatingBody``),
so it is rendered once whatever the number of scrapes, and a client that does not read holds a chunk of it, not
a copy (issue 39: 200 such clients made 200 renders and 8.8 GB before).

``Publisher`` decides which publication scrapes serve (issue 41: a scrape never shapes, renders or compresses a
report). Attached to the exporter's event loop, it prepares a publication of the newest report in steps, each
its own turn of the loop, so a request that arrives meanwhile waits for one step at most, never for the whole
preparation (short parts run together in one turn until ``STEP_SECONDS`` have gone; the longest part of a
trn2.48xlarge report, the end of its shaping, takes about 0.2 ms of CPU). Each next step is a timer, which the loop
runs after the requests that came meanwhile, and while a scrape is due (``hold``) steps wait for it:

1. shape the newest report, a runtime at a time (``Snapshot.shaping_steps``; a malformed one is passed over by
   ``ExporterState.served``, the previous stays served);
2. render its text in each format scrapes have asked for, a family per step;
3. compress each such text that scrapes take gzip-compressed, a family per step (a text of at most
   ``COMPRESS_AHEAD_BYTES``, a host-only report's, is left to its scrape, which compresses it in one pass with
   its tail);
4. publish: one reference assignment, so a scrape serves one report or the next, never parts of both.

Reports usually arrive more often than Prometheus scrapes, so a publication is prepared only when a scrape is
due: ``lead`` seconds before the next scrape the gap between the last two predicts (as soon as a report arrives
when nothing was published yet, with no scrape history, or when the publication was already scraped and the
next scrape is near). A report is never kept unpublished for more than a quarter of the staleness window, so an
irregular scraper still sees fresh data. Counting (``ExporterState.apply``) still takes every report, as each one
arrives (``ingest``). Without a loop (a replay, the tests, OTLP's in-process use) scrapes publish: a scrape
serves the state's newest report, and publishes it (shaped and rendered on first use) when it is not the
current publication.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence

from neuron_monitor.exporters.prometheus.exposition import SampleRenderer
from neuron_monitor.exporters.prometheus.families import Family
from neuron_monitor.exporters.prometheus.snapshot import Shaped, Snapshot
from neuron_monitor.exporters.prometheus.state import ExporterState, View
from neuron_monitor.exporters.prometheus.values import MalformedReport

LEAD = 0.1  # seconds before a predicted scrape at which the newest report's publication starts
STEP_SECONDS = 0.00025  # parts of a publication run in one turn of the loop until this much time has gone
# ... and while the current publication is short (a host-only report's, about 0.1 ms, 0.3 ms with the caches cold
# after 0.1 s idle on a shared VM), this much: its next one in one turn, not two
SHORT_STEP_SECONDS = 0.001
MIN_GAP = 0.05  # gaps between scrapes shorter than this (retries, a second client) do not change the prediction
QUIET_BEFORE = 0.003  # seconds before a predicted scrape from which other work on the loop waits (``hold``)
QUIET_AFTER = 0.005  # seconds after the predicted time until which it waits for a late scrape
# While more lines of the same read wait to be applied, the start of a publication waits this long at most for the
# newest of them (``report_applied(more=True)``): a read of several short reports is published once, not per line
LINES_WAIT = 0.01
DEFAULT_FORMATS = frozenset({(False, True)})  # (OpenMetrics, gzip): Prometheus text, compressed
GZIP_LEVEL = 1  # the text compresses ~15x at level 1; higher levels cost 3-5x the CPU for a few percent
# The rendered Neuron text kept per report and format: every real host's fits (a trn2.48xlarge report renders
# about 0.3 MB, 0.4 MB with --series-detail full); a longer one is rendered per uncompressed scrape instead.
KEEP_TEXT_BYTES = 4 * 1024 * 1024
# A kept text at most this long is not compressed ahead by the publisher: its scrape compresses it with the tail
# in one pass (about 0.03 ms of CPU at level 1 for a host-only report's 3 KB), which costs no more than the tail
# alone after a head compressed ahead, so the head's compression per report (a call per family) is saved.
COMPRESS_AHEAD_BYTES = 16 * 1024
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # RFC 1952: deflate, no flags, no mtime, OS unknown
Served = tuple[Snapshot, Shaped, float, float]  # what ``ExporterState.served`` gives for a report


def served_families(view: View) -> Sequence[Family]:
    """The Neuron families a view serves: its report's, while it is fresh; none when stale or before a report."""
    if view.serving and view.shaped is not None:
        return view.shaped.families
    return ()


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
    compressed head (``Publication.gzip``), then the per-scrape ``tail``. It holds the shared head, an
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


class Publication:
    """One served report (or none) and the one rendering of its Neuron families, made lazily per format and
    shared by every scrape of it.

    Its text is kept as one ``bytes`` part per family, and only while it is at most ``keep_bytes`` long (every
    real host's is); a longer one (a hostile report's huge label values) is rendered again for each uncompressed
    scrape and let go once sent, and its compressed head is built family by family, so the text is never held
    whole beside the families it came from (issue 32)."""

    def __init__(
        self,
        served: Served | None,
        view: View,
        renderer: SampleRenderer,
        keep_bytes: int = KEEP_TEXT_BYTES,
        whole: bool = False,
    ) -> None:
        self.served = served  # what ``ExporterState.served`` gave (``view_of`` makes the view of it as of now)
        self.whole = whole  # render the text whole from one template (the previous report's was short)
        self.shaped = view.shaped
        self.renderer = renderer
        self.serving = view.serving
        self.families = served_families(view)
        self.keep_bytes = keep_bytes
        self._parts: dict[bool, list[bytes]] = {}
        self._gzip: dict[bool, tuple[bytes, int, int]] = {}
        self._lock = threading.Lock()
        self.renders = 0
        self._scrapes: set[bool] = set()  # the formats (OpenMetrics or not) served gzip-compressed at least once
        self._large: set[bool] = set()  # the formats whose text is longer than ``keep_bytes`` (not kept)
        self._last_gzip: dict[bool, tuple[bytes, list[bytes]]] = {}  # format -> (tail, the gzip body made with it)

    def matches(self, view: View) -> bool:
        return self.shaped is view.shaped and self.serving == view.serving

    def _render(self, openmetrics: bool) -> Iterator[bytes]:
        self.renders += 1
        if self.whole:  # a short report's text in one part, from one template (``SampleRenderer.whole``)
            text = self.renderer.whole(self.families, openmetrics)
            if text is not None:
                yield text.encode("utf-8")
                return
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

    def rendering_steps(self, openmetrics: bool) -> Iterator[None]:
        """``kept_parts`` in steps for the publisher (a yield after each family), kept once whole; nothing is kept
        of a text longer than ``keep_bytes`` (a scrape renders it as it is served)."""
        with self._lock:
            if openmetrics in self._parts or openmetrics in self._large:
                return
        parts: list[bytes] = []
        size = 0
        for part in self._render(openmetrics):
            size += len(part)
            if size > self.keep_bytes:
                with self._lock:
                    self._large.add(openmetrics)
                return
            parts.append(part)
            yield
        with self._lock:
            self._parts.setdefault(openmetrics, parts)

    def compressing_steps(self, openmetrics: bool) -> Iterator[None]:
        """``gzip`` of a kept text in steps for the publisher (a yield after each family's part); nothing for a
        text of at most ``COMPRESS_AHEAD_BYTES`` (``body`` compresses it with the tail in one pass)."""
        with self._lock:
            kept = self._parts.get(openmetrics)
            if kept is None or openmetrics in self._gzip:
                return
        length = sum(map(len, kept))
        if length <= COMPRESS_AHEAD_BYTES:  # a short text: its scrape compresses it in one pass with the tail
            return
        compressor = _deflater(length)
        out, crc = [GZIP_HEADER], 0
        for part in kept:
            out.append(compressor.compress(part))
            crc = zlib.crc32(part, crc)
            yield
        out.append(compressor.flush(zlib.Z_SYNC_FLUSH))
        with self._lock:
            self._gzip.setdefault(openmetrics, (b"".join(out), crc, length))

    def text(self, openmetrics: bool) -> bytes:
        return b"".join(self.parts(openmetrics))

    def short(self) -> bool:
        """Whether some text is kept and each kept one is at most ``COMPRESS_AHEAD_BYTES`` long (a host-only
        report's: its next publication is prepared in the turn of the loop its report is counted in)."""
        with self._lock:
            kept = list(self._parts.values())
        return bool(kept) and all(sum(map(len, parts)) <= COMPRESS_AHEAD_BYTES for parts in kept)

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

    def body(self, openmetrics: bool, gzipped: bool, tail: bytes) -> list[bytes] | InflatingBody:
        """One /metrics body: this rendering, then ``tail``, as parts (shared bytes: the server writes them a
        chunk at a time, so a large body is never copied), gzip-compressed (one gzip member) when ``gzipped``;
        or, for a text too long to keep, uncompressed, an ``InflatingBody`` that makes it as it is read."""
        if not gzipped:
            kept = self.kept_parts(openmetrics)
            if kept is not None:
                return [*kept, tail]
            return InflatingBody(self.gzip(openmetrics), tail)
        last = self._last_gzip.get(openmetrics)
        if last is not None and last[0] is tail:  # the same tail object as the last gzip scrape's: its body again
            self.scraped(openmetrics)
            return list(last[1])
        body = self._gzip_body(openmetrics, tail)
        self._last_gzip[openmetrics] = (tail, body)
        return list(body)

    def _gzip_body(self, openmetrics: bool, tail: bytes) -> list[bytes]:
        """``body`` gzip-compressed: this rendering, then ``tail``, as one gzip member."""
        if (
            not self.scraped(openmetrics)
            and not self.compressed(openmetrics)
            and (parts := self.kept_parts(openmetrics)) is not None
        ):
            # usually the only scrape of this report: one pass over it all (a text too long to keep goes family
            # by family into the kept head below instead, and is never held whole)
            text = b"".join(parts)  # a short text: one compress call costs less than one per family
            whole = _deflater(len(text) + len(tail), gzip_wrapper=True)
            return [whole.compress(text) + whole.compress(tail) + whole.flush()]
        head, crc, length = self.gzip(openmetrics)
        finish = _deflater(len(tail))
        deflated = finish.compress(tail) + finish.flush()  # Z_FINISH: the stream's final block
        trailer = struct.pack("<II", zlib.crc32(tail, crc), (length + len(tail)) & 0xFFFFFFFF)
        return [head, deflated, trailer]


class Publisher:
    """Decides the publication scrapes serve: prepared on ``loop`` once attached (``attach``), else made by the
    scrapes themselves (``by_scrapes``). Owns the renderer and the text size kept per format."""

    def __init__(self, state: ExporterState, lead: float = LEAD) -> None:
        self.state = state
        self.lead = lead
        self.renderer = SampleRenderer()  # keeps each series' label text from report to report
        self.keep_text_bytes = KEEP_TEXT_BYTES  # the longest Neuron text kept per report and format
        self.by_scrapes = True  # until attached: a scrape publishes the state's newest report (see ``serving``)
        self.current: Publication | None = None
        self.publications = 0  # publications prepared (by ``_steps``)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._work: Iterator[None] | None = None
        self._pending = False  # a report was applied since the newest publication started
        self._scraped = False  # the current publication was served by a scrape
        self._last_scrape: float | None = None
        self._gap: float | None = None
        self._arrived = 0.0  # loop time the oldest unpublished report was applied
        self.formats: set[tuple[bool, bool]] = set()  # (OpenMetrics, gzip) that scrapes asked for
        self._hurry = False  # publish without waiting for a scrape to be due (``hurry``)
        self._waiting_lines = False  # the timer is the start put off while a read's lines are applied
        self._short = False  # the current publication's texts are short (``Publication.short``)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on publications are prepared on ``loop`` (``report_applied`` tells of each report)."""
        self._loop = loop
        self.by_scrapes = False
        if self._pending:
            self._schedule()

    def report_applied(self, more: bool = False) -> None:
        """A report was counted (call on the loop's thread): publish it when a scrape is due. ``more``: further
        lines of the same read wait to be applied; then the start waits for the newest of them (at most
        ``LINES_WAIT``), so the reports of one read make one publication, not one each (the first one's would be
        superseded at once: about half of a host-only stream's publications, read four times a second)."""
        loop = self._loop
        if not self._pending:
            self._pending = True
            self._arrived = loop.time() if loop is not None else 0.0
        if loop is None or self._work is not None:
            return
        timer = self._timer
        if more:
            if timer is None:
                now = loop.time()
                self._timer = loop.call_at(max(self.due(now), now + LINES_WAIT), self._start)
                self._waiting_lines = True
            return
        if timer is not None and self._waiting_lines:
            timer.cancel()
            timer = self._timer = None
        if timer is None:
            now = loop.time()
            if self._short and self.due(now) <= now and self.hold(now) is None:
                # a short report's publication (a host-only one: about 0.1 ms) in this turn of the loop, right
                # after its count: a turn of its own costs about as much again
                self._start()
                return
            self._schedule()

    def reads_paused(self, until: float) -> None:
        """Nothing more will be counted before loop time ``until`` (stdin's next tick; call on the loop's thread,
        right after the read's last report was counted). A publication that is due before then would publish the
        report that is newest now, so it starts now, while the caches still hold that report and the code that
        counted it, instead of in a wake-up of its own (a trn2.48xlarge publication costs about half as much
        again cold). Its steps still wait while a scrape is due (``hold``)."""
        loop = self._loop
        timer = self._timer
        if loop is None or timer is None or self._waiting_lines or self._work is not None or not self._pending:
            return
        if timer.when() > until or self.hold(loop.time()) is not None:
            return
        timer.cancel()
        self._start()

    def scraped(self, openmetrics: bool, gzipped: bool) -> None:
        """A scrape was served in this format: remember its time (for the next one's) and its format."""
        self.formats.add((openmetrics, gzipped))
        self._scraped = True
        if self._loop is None:
            return
        now = self._loop.time()
        if self._last_scrape is not None and now - self._last_scrape >= MIN_GAP:
            self._gap = now - self._last_scrape
        if self._last_scrape is None or now - self._last_scrape >= MIN_GAP:
            self._last_scrape = now
        timer = self._timer
        if self._pending and self._work is None and not self._waiting_lines and (timer is None or timer.when() > now):
            # the next scrape's publication: reschedule by the new prediction. A start that is due is kept: a
            # scrape in every turn of the loop would otherwise put it off again each turn, forever
            if timer is not None:
                timer.cancel()
                self._timer = None
            self._schedule()

    def due(self, now: float) -> float:
        """Loop time at which to start publishing the newest report (see the module docstring)."""
        if self._hurry or self.publications == 0 or self._gap is None or self._last_scrape is None:
            return now
        latest = self._arrived + self.state.window() / 4
        predicted = self._last_scrape + self._gap
        start = predicted - self.lead
        if now >= start and not self._scraped:  # the publication prepared for this scrape is waiting for it
            start += self._gap
        return min(max(start, now), max(latest, now))

    def hold(self, now: float) -> float | None:
        """While a scrape is due (from ``QUIET_BEFORE`` before the predicted time until it comes, at most
        ``QUIET_AFTER`` after it), the loop time until which work that can wait (ingest's steps, publication
        steps) waits, so the loop is idle when the scrape arrives; else None."""
        if self._gap is None or self._last_scrape is None:
            return None
        predicted = self._last_scrape + self._gap
        if predicted - QUIET_BEFORE <= now < predicted + QUIET_AFTER:
            return predicted + QUIET_AFTER
        return None

    def _schedule(self) -> None:
        assert self._loop is not None
        when = self.due(self._loop.time())
        self._timer = self._loop.call_at(when, self._start)
        self._waiting_lines = False

    def _start(self) -> None:
        self._timer = None
        self._waiting_lines = False
        self._pending = False
        self._work = self._steps()
        self._step()

    def _step(self) -> None:
        if self._work is None:  # published at once meanwhile (``publish_now``)
            return
        assert self._loop is not None
        until = self.hold(self._loop.time())
        if until is not None:
            self._loop.call_at(until, self._step)
            return
        started = time.perf_counter()
        budget = SHORT_STEP_SECONDS if self._short else STEP_SECONDS
        while time.perf_counter() - started < budget:  # short parts run together, up to the budget
            if next(self._work, StopIteration) is StopIteration:
                self._work = None
                if self._pending:
                    self._schedule()
                return
        self._loop.call_later(0.0, self._step)  # a timer: the loop runs it after the requests that came meanwhile

    def _steps(self) -> Iterator[None]:
        newest = self.state.newest()
        if newest is not None:
            with contextlib.suppress(MalformedReport):  # ``served`` passes over it (and counts it)
                yield from newest.shaping_steps()  # step 1: shaping, a yield between runtimes
            yield
        served = self.state.served()
        yield
        publication = Publication(
            served, self.state.view_of(served), self.renderer, self.keep_text_bytes, whole=self._short
        )
        for openmetrics, gzipped in sorted(self.formats or DEFAULT_FORMATS):
            yield from publication.rendering_steps(openmetrics)  # a hostile report's huge text: rendered as scraped
            if gzipped:
                yield from publication.compressing_steps(openmetrics)
        self.current = publication
        self._scraped = False
        self.publications += 1
        self._short = publication.short()

    def view(self) -> View:
        """The view a scrape serves: the current publication's report as of now (no report before the first;
        the state's newest report while ``by_scrapes``)."""
        if self.by_scrapes:
            return self.state.view()
        current = self.current
        return self.state.view_of(current.served if current is not None else None)

    def serving(self) -> tuple[View, Publication]:
        """The view a scrape serves and its publication. Attached, the current publication (never shaped or
        rendered here); once its report is stale, or before the first, a publication of that view, which renders
        no Neuron family. While ``by_scrapes``, the state's newest report, published here when it is not the
        current publication (then shaped and rendered on first use)."""
        with self._lock:
            current = self.current
            served: Served | None = None
            if self.by_scrapes:
                served = self.state.served()
            elif current is not None:
                served = current.served
            view = self.state.view_of(served)
            if current is None or not current.matches(view):
                current = Publication(served, view, self.renderer, self.keep_text_bytes)
                self.current = current  # a report is published whole: one reference assignment
            return view, current

    def hurry(self) -> None:
        """From now on publish each report as soon as it is counted (end of input: no report will follow)."""
        self._hurry = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._schedule()

    def publish_now(self) -> None:
        """Prepare and publish the newest report in one go (tests, and callers without a loop)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = False
        self._work = None
        for _ in self._steps():
            pass
