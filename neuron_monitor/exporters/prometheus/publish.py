"""What a scrape serves: the last complete rendering, prepared in small steps on the event loop (issue 41).

A scrape never shapes, renders or compresses a report: it takes the newest *publication* (one served report with
its families rendered, and gzip-compressed, in the formats scrapes ask for) and adds the per-scrape self-metrics.
``Publisher`` prepares a publication of the newest report in steps, each its own turn of the loop, so a request
that arrives meanwhile waits for one step at most, never for the whole preparation (short parts run together in
one turn until ``STEP_SECONDS`` have gone; the longest part, rendering a trn2.48xlarge report's text, takes about
0.6 ms of CPU):

1. shape the newest report, a runtime at a time (``Snapshot.shaping_steps``; a malformed one is passed over by
   ``ExporterState.served``, the previous stays served);
2. render its text in each format scrapes have asked for, one step per format;
3. compress each such text that scrapes take gzip-compressed, one step per format;
4. publish: one reference assignment, so a scrape serves one report or the next, never parts of both.

Reports usually arrive more often than Prometheus scrapes, so a publication is prepared only when a scrape is
due: ``lead`` seconds before the next scrape the gap between the last two predicts (as soon as a report arrives
when there is no publication yet, no scrape history, or the publication was already scraped and the next scrape is
near). A report is never kept unpublished for more than a quarter of the staleness window, so an irregular scraper
still sees fresh data. Counting (``ExporterState.apply``) still takes every report, as each one arrives
(``ingest``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from neuron_monitor.exporters.prometheus.collector import ExporterCollector, RenderedReport
from neuron_monitor.exporters.prometheus.snapshot import Shaped, Snapshot
from neuron_monitor.exporters.prometheus.state import View
from neuron_monitor.exporters.prometheus.values import MalformedReport

LEAD = 0.1  # seconds before a predicted scrape at which the newest report's publication starts
STEP_SECONDS = 0.0005  # parts of a publication run in one turn of the loop until this much time has gone
MIN_GAP = 0.05  # gaps between scrapes shorter than this (retries, a second client) do not change the prediction
DEFAULT_FORMATS = frozenset({(False, True)})  # (OpenMetrics, gzip): Prometheus text, compressed


@dataclass(frozen=True)
class Publication:
    """One served report, prepared whole: what ``ExporterState.served`` gave, and its rendering."""

    served: tuple[Snapshot, Shaped, float, float] | None
    rendered: RenderedReport


class Publisher:
    """Prepares publications on ``loop`` and hands the newest complete one to ``collector``'s scrapes."""

    def __init__(self, collector: ExporterCollector, lead: float = LEAD) -> None:
        self.collector = collector
        self.state = collector.state
        self.lead = lead
        self.current: Publication | None = None
        self.publications = 0
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
        collector.publisher = self

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self._pending:
            self._schedule()

    def report_applied(self) -> None:
        """A report was counted (call on the loop's thread): publish it when a scrape is due."""
        if not self._pending:
            self._pending = True
            self._arrived = self._loop.time() if self._loop is not None else 0.0
        if self._loop is not None and self._work is None and self._timer is None:
            self._schedule()

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
        if self._pending and self._work is None:  # the next scrape's publication: reschedule by the new prediction
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._schedule()

    def due(self, now: float) -> float:
        """Loop time at which to start publishing the newest report (see the module docstring)."""
        if self._hurry or self.current is None or self._gap is None or self._last_scrape is None:
            return now
        latest = self._arrived + self.state.window() / 4
        predicted = self._last_scrape + self._gap
        start = predicted - self.lead
        if now >= start and not self._scraped:  # the publication prepared for this scrape is waiting for it
            start += self._gap
        return min(max(start, now), max(latest, now))

    def _schedule(self) -> None:
        assert self._loop is not None
        when = self.due(self._loop.time())
        self._timer = self._loop.call_at(when, self._start)

    def _start(self) -> None:
        self._timer = None
        self._pending = False
        self._work = self._steps()
        self._step()

    def _step(self) -> None:
        if self._work is None:  # published at once meanwhile (``publish_now``)
            return
        assert self._loop is not None
        started = time.perf_counter()
        while time.perf_counter() - started < STEP_SECONDS:  # short parts run together, up to STEP_SECONDS
            if next(self._work, StopIteration) is StopIteration:
                self._work = None
                if self._pending:
                    self._schedule()
                return
        self._loop.call_soon(self._step)

    def _steps(self) -> Iterator[None]:
        newest = self.state.newest()
        if newest is not None:
            with contextlib.suppress(MalformedReport):  # ``served`` passes over it (and counts it)
                yield from newest.shaping_steps()  # step 1: shaping, a yield between runtimes
        served = self.state.served()
        yield
        view = self.state.view_of(served)
        collector = self.collector
        rendered = RenderedReport(view, collector.served_families(view), collector.renderer, collector.keep_text_bytes)
        for openmetrics, gzipped in sorted(self.formats or DEFAULT_FORMATS):
            if rendered.kept_parts(openmetrics) is None:  # a hostile report's huge text: rendered as scraped
                continue
            yield
            if gzipped:
                rendered.gzip(openmetrics)
                yield
        self.current = Publication(served, rendered)
        self._scraped = False
        self.publications += 1

    def view(self) -> View:
        """The view a scrape serves: the current publication's report as of now (no report before the first)."""
        current = self.current
        return self.state.view_of(current.served if current is not None else None)

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
