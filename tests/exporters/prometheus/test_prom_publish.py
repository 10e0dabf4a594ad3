"""Scrapes serve the last complete rendering (``publish``, issue 41): never a report being counted or shaped,
never parts of two reports; and the publisher's schedule (a publication is prepared when a scrape is due)."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import threading
import time

import orjson
import pytest

from neuron_monitor.exporters.prometheus import publish
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

DEADLINE = 120.0
REPORTS = 60
MAX_BODIES = 400  # scrape bodies kept for the check
FORMATS = (  # gzip and plain, Prometheus text and OpenMetrics: each is one report or the next
    {"Accept-Encoding": "gzip"},
    {},
    {"Accept": "application/openmetrics-text; version=1.0.0"},
    {"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"},
)


def _report(i: int) -> bytes:
    """Report ``i``: every core's utilization and the report time say ``i``."""
    runtimes = [
        runtime(1000 + d, f"job-{d:02d}", [4 * d + c for c in range(4)], utilization=float(i % 90 + 1))
        for d in range(16)
    ]
    return orjson.dumps(trn2_report(runtimes, report_time=1.7e9 + i))


def _utilization(text: str) -> dict[str, str]:
    """The body's ``neuroncore_utilization_ratio`` samples: {label text: value text} (read by line: fast)."""
    prefix = "neuroncore_utilization_ratio{"
    return dict(line[len(prefix) :].rsplit("} ", 1) for line in text.splitlines() if line.startswith(prefix))


def _expected(n: int) -> list[dict[str, str]]:
    """Each report's ``neuroncore_utilization_ratio`` series, as the exporter serves that report alone."""
    out = []
    for i in range(n):
        state = ExporterState(stale_periods=1e9)
        state.apply(orjson.loads(_report(i)))
        out.append(_utilization(ExporterCollector(state).scrape([], False).decode()))
    return out


def _which_reports(text: str, expected: list[dict[str, str]] | None = None) -> set[float]:
    """The reports a scrape's body shows: the newest report's time, and the report whose utilization series
    the body's are (-1 when they are no report's: parts of several)."""
    name = "neuron_exporter_last_report_time_seconds "
    seen = {float(line[len(name) :]) - 1.7e9 for line in text.splitlines() if line.startswith(name)}
    utilization = _utilization(text)
    if utilization:
        if expected is None:
            expected = _expected(int(max(seen, default=0.0)) + 1)
        seen.add(float(next((i for i, e in enumerate(expected) if e == utilization), -1)))
    return seen


def test_a_scrape_shows_one_report_or_the_next_never_parts_of_both() -> None:
    exporter = ExporterProcess()
    bodies: list[str] = []
    stop = threading.Event()

    def scrape() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=30)
        turn = 0
        while not stop.is_set():
            conn.request("GET", "/metrics", headers=FORMATS[turn % len(FORMATS)])  # each format in turn
            turn += 1
            resp = conn.getresponse()
            body = resp.read()
            if resp.getheader("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if len(bodies) < MAX_BODIES:
                bodies.append(body.decode())
            time.sleep(0.01)
        conn.close()

    scraper = threading.Thread(target=scrape)
    try:
        scraper.start()
        for i in range(REPORTS):
            exporter.send(_report(i))
            time.sleep(0.02)
        exporter.wait_for(
            "/metrics", lambda _status, body: float(REPORTS - 1) in _which_reports(body, []), timeout=DEADLINE
        )
        deadline = time.monotonic() + DEADLINE
        while len(bodies) < 20:
            assert time.monotonic() < deadline, "too few scrapes before the deadline"
            time.sleep(0.05)
    finally:
        stop.set()
        scraper.join(DEADLINE)
        exporter.stop()
    expected = _expected(REPORTS)
    shown = [_which_reports(body, expected) for body in bodies]
    torn = [s for s in shown if len(s) > 1]
    assert not torn, f"scrapes showing parts of several reports: {torn[:3]}"
    assert sum(1 for s in shown if s) >= 1


def _state_with_reports(n: int) -> ExporterState:
    state = ExporterState(stale_periods=1e9)
    for i in range(n):
        state.apply(orjson.loads(_report(i)))
    return state


def test_a_scrape_serves_the_publication_not_a_newer_report_being_prepared() -> None:
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.by_scrapes = False  # a scrape serves what was published, and publishes nothing
    assert _which_reports(collector.scrape([], False).decode()) == set()  # nothing published yet: no report
    publisher.publish_now()
    assert _which_reports(collector.scrape([], False).decode()) == {0.0}
    state.apply(orjson.loads(_report(1)))  # counted, not yet published
    assert _which_reports(collector.scrape([], False).decode()) == {0.0}
    publisher.publish_now()
    assert _which_reports(gzip.decompress(collector.body([], False, True)).decode()) == {1.0}


def test_publications_are_prepared_in_steps_when_a_scrape_is_due() -> None:
    loop = asyncio.new_event_loop()
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.lead = 0.05
    publisher.attach(loop)
    publisher.report_applied()  # no publication yet: prepared at once
    deadline = time.monotonic() + DEADLINE
    while publisher.current is None:
        assert time.monotonic() < deadline
        loop.run_until_complete(asyncio.sleep(0.01))
    collector.body([], False, True)  # a scrape...
    loop.run_until_complete(asyncio.sleep(0.3))
    collector.body([], False, True)  # ...and the next, 0.3 s later: the next is predicted at +0.3 s
    scraped_at = loop.time()
    state.apply(orjson.loads(_report(1)))
    publisher.report_applied()
    assert publisher.due(loop.time()) >= scraped_at + 0.3 - 0.05 - 0.01  # not before the next scrape is near
    while _which_reports(gzip.decompress(collector.body([], False, True)).decode()) != {1.0}:
        assert time.monotonic() < deadline
        loop.run_until_complete(asyncio.sleep(0.05))
    loop.close()


def test_shaping_in_steps_gives_what_shaping_at_once_gives() -> None:
    """``Snapshot.shaping_steps`` (the publisher's way: a yield between runtimes) and ``Snapshot.shaped`` make the
    same families from the same report."""
    line = _report(7)
    stepped_state, whole_state = _state_with_reports(0), _state_with_reports(0)
    stepped_state.apply(orjson.loads(line))
    whole_state.apply(orjson.loads(line))
    snapshot = stepped_state.newest()
    assert snapshot is not None
    steps = sum(1 for _ in snapshot.shaping_steps())
    assert steps >= 16  # one turn of the loop per runtime at least
    stepped = ExporterCollector(stepped_state).scrape([], False)
    whole = ExporterCollector(whole_state).scrape([], False)
    assert stepped.split(b"neuron_exporter_")[0] == whole.split(b"neuron_exporter_")[0]
    assert snapshot.shaped() is stepped_state.view().shaped  # kept: shaped once


def test_a_publication_is_rendered_and_compressed_a_family_at_a_time() -> None:
    """The publisher's steps render and compress the text a family per step (no step holds the loop for a whole
    text), and publish what a scrape that renders at once serves, byte for byte."""
    state = _state_with_reports(3)
    stepped = ExporterCollector(state)
    stepped.publisher.by_scrapes = False
    stepped.publisher.formats = {(False, True), (True, False)}
    steps = sum(1 for _ in stepped.publisher._steps())
    publication = stepped.publisher.current
    assert publication is not None and publication.compressed(False)
    families = len(publication.families)
    assert steps >= 3 * families  # text: render and compress per family; OpenMetrics: render per family
    at_once = ExporterCollector(state)  # publishes as scraped, in one go
    for openmetrics in (False, True):
        want = at_once.body([], openmetrics, False)
        assert (
            stepped.body([], openmetrics, False).split(b"# HELP neuron_exporter_")[0]
            == want.split(b"# HELP neuron_exporter_")[0]
        )
        assert gzip.decompress(stepped.body([], openmetrics, True)) == stepped.body([], openmetrics, False)


def test_a_short_text_is_compressed_by_its_scrape_not_ahead() -> None:
    """A text of at most COMPRESS_AHEAD_BYTES (a host-only report's) is not compressed by the publisher's steps;
    its gzip scrapes (the first in one pass with the tail, a second from a head then built) inflate to exactly
    the uncompressed body, and a text longer than that is compressed ahead."""
    from neuron_monitor.exporters.prometheus.publish import COMPRESS_AHEAD_BYTES

    state = ExporterState(stale_periods=1e9)
    state.apply(trn2_report(runtimes=[], vcpus=2, devices=0))
    collector = ExporterCollector(state)
    collector.publisher.by_scrapes = False
    collector.publisher.publish_now()
    publication = collector.publisher.current
    assert publication is not None
    assert 0 < sum(map(len, publication.parts(False))) <= COMPRESS_AHEAD_BYTES
    assert not publication.compressed(False)
    plain = collector.body([], False, False).split(b"# HELP neuron_exporter_")[0]
    for _ in range(2):  # the first scrape of it, then a second
        assert gzip.decompress(collector.body([], False, True)).split(b"# HELP neuron_exporter_")[0] == plain
    large = ExporterCollector(_state_with_reports(1))
    large.publisher.by_scrapes = False
    large.publisher.publish_now()
    assert large.publisher.current is not None and large.publisher.current.compressed(False)


def test_work_waits_while_a_scrape_is_due() -> None:
    """``Publisher.hold``: from QUIET_BEFORE before the scrape the last gap predicts until it comes (at most
    QUIET_AFTER late), other work on the loop waits; before the first gap, or between scrapes, nothing waits."""
    from neuron_monitor.exporters.prometheus.publish import QUIET_AFTER, QUIET_BEFORE

    loop = asyncio.new_event_loop()
    publisher = ExporterCollector(_state_with_reports(1)).publisher
    publisher.attach(loop)
    assert publisher.hold(loop.time()) is None  # no scrape yet
    publisher._last_scrape, publisher._gap = 100.0, 15.0  # scraped at 100 s, every 15 s: the next at 115 s
    assert publisher.hold(110.0) is None
    assert publisher.hold(115.0 - QUIET_BEFORE / 2) == 115.0 + QUIET_AFTER
    assert publisher.hold(115.0 + QUIET_AFTER / 2) == 115.0 + QUIET_AFTER
    assert publisher.hold(115.0 + QUIET_AFTER * 2) is None  # the scrape did not come: work goes on
    loop.close()


def test_scrapes_in_every_turn_of_the_loop_do_not_put_a_due_publication_off() -> None:
    """A publication whose start is due is not rescheduled by the scrapes that come meanwhile: with a scrape in
    every turn of the loop (many clients at once) the newest report is still published (each scrape used to
    cancel the due start and set it again, so it never ran)."""
    loop = asyncio.new_event_loop()
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.attach(loop)
    publisher.report_applied()  # nothing published yet: due at once
    published = loop.create_future()
    turns = 0

    def scrape() -> None:  # a request served in every turn of the loop, before the loop's due timers
        nonlocal turns
        turns += 1
        collector.body([], False, True)
        if publisher.publications or turns >= 5000:
            published.set_result(publisher.publications)
        else:
            loop.call_soon(scrape)

    loop.call_soon(scrape)
    assert loop.run_until_complete(published) == 1
    assert _which_reports(gzip.decompress(collector.body([], False, True)).decode()) == {0.0}
    loop.close()


def test_the_reports_of_one_read_make_one_publication_of_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    """``report_applied(more=True)`` (more lines of the same read wait to be applied) puts the start off until the
    read's last report is counted: three reports of one read, one publication, of the third. (The put-off start's
    own limit, ``LINES_WAIT``, is set far off here: a starved machine may take longer than it between two lines.)"""
    monkeypatch.setattr(publish, "LINES_WAIT", 3600.0)
    loop = asyncio.new_event_loop()
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.attach(loop)
    publisher.report_applied(more=True)  # nothing published yet, but two more lines of this read wait
    for i in (1, 2):
        loop.run_until_complete(asyncio.sleep(0))  # a turn of the loop per line, as ingest's steps take
        state.apply(orjson.loads(_report(i)))
        publisher.report_applied(more=i < 2)
    deadline = time.monotonic() + DEADLINE
    while publisher.current is None:
        assert time.monotonic() < deadline
        loop.run_until_complete(asyncio.sleep(0.01))
    loop.run_until_complete(asyncio.sleep(0.05))
    assert publisher.publications == 1
    assert _which_reports(gzip.decompress(collector.body([], False, True)).decode()) == {2.0}
    loop.close()


def test_a_start_put_off_for_more_lines_still_comes_when_none_is_counted() -> None:
    """When the lines that were waiting count nothing (bad lines), the put-off start comes anyway (after
    ``LINES_WAIT``): the report counted last is published."""
    loop = asyncio.new_event_loop()
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.attach(loop)
    publisher.report_applied(more=True)  # the lines after it turn out bad: no report_applied follows
    deadline = time.monotonic() + DEADLINE
    while publisher.current is None:
        assert time.monotonic() < deadline
        loop.run_until_complete(asyncio.sleep(0.01))
    assert _which_reports(gzip.decompress(collector.body([], False, True)).decode()) == {0.0}
    loop.close()


def test_a_scrape_tail_and_its_gzip_body_are_reused_only_while_nothing_changed() -> None:
    """While the self-metrics and the process reading stay the same, a scrape's tail is the same object and a
    gzip scrape of the same publication gets the body made for it; a change makes both anew. Every body is the
    publication's text then the tail, whole."""
    from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics, ProcessReading

    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    process = ProcessMetrics(read_every=3600.0)
    collector.publisher.publish_now()
    view, publication = collector.publisher.serving()
    tail = collector.tail(view, [process], False)
    assert collector.tail(view, [process], False) is tail
    bodies = [gzip.decompress(collector.body([process], False, True)) for _ in range(3)]
    text = publication.text(False)
    assert bodies == [text + tail] * 3
    state.apply(orjson.loads(_report(1)))  # a change the self-metrics show (reports counted)
    view, publication = collector.publisher.serving()  # not attached to a loop: the newest report, published
    changed = collector.tail(view, [process], False)
    assert changed is not tail and changed != tail
    assert gzip.decompress(collector.body([process], False, True)) == publication.text(False) + changed
    process.read_every = 0.0  # a new reading per scrape, and one whose figures moved: a new tail
    process._readings = lambda: ProcessReading(1e9, 3e7, 1.7e9, 12.25, 9.0, 1024.0)  # type: ignore[method-assign]
    moved = collector.tail(view, [process], False)
    assert moved is not changed and b"process_cpu_seconds_total 12.25\n" in moved


def _host_report(i: int) -> dict[str, object]:
    """A host-only report as our daemon writes it (vcpu_usage and memory_info; its text is about 3 KB)."""
    usage = {
        "user": 10.0 + i,
        "nice": 0.0,
        "system": 5.0,
        "idle": 85.0 - i,
        "io_wait": 0.0,
        "irq": 0.0,
        "soft_irq": 0.0,
    }
    return {
        "neuron_runtime_data": [],
        "system_data": {
            "memory_info": {
                "period": 0.1,
                "memory_total_bytes": 25276510208,
                "memory_used_bytes": 1281220608 + 4096 * i,
                "swap_total_bytes": 0,
                "swap_used_bytes": 0,
                "error": "",
            },
            "vcpu_usage": {
                "period": 0.1,
                "average_usage": usage,
                "usage_data": {"0": usage, "1": usage},
                "context_switch_count": 4893 + i,
                "error": "",
            },
        },
        "instance_info": {"instance_id": "i-0123456789abcdef0", "error": ""},
        "neuron_hardware_info": {"neuron_device_count": 0, "error": ""},
        "report_time": 1.7e9 + i / 10,
    }


def test_a_short_publication_is_rendered_whole_as_the_renderer_renders_it() -> None:
    """After a short publication the next is rendered whole from one template (``SampleRenderer.whole``); each
    publication's text is what the plain renderer writes for its families."""
    from neuron_monitor.exporters.prometheus.exposition import render_families

    state = ExporterState(stale_periods=1e9)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.by_scrapes = False
    wholes = 0
    for i in range(6):
        state.apply(_host_report(i))
        publisher.publish_now()
        publication = publisher.current
        assert publication is not None and publication.families
        wholes += publication.whole
        for openmetrics in (False, True):
            expected = render_families(publication.families, openmetrics).encode()
            assert publication.text(openmetrics) == expected
            assert publication.parts(openmetrics) == (
                [expected] if publication.whole else publication.parts(openmetrics)
            )
    assert wholes == 5  # every publication after the first short one


def test_a_publication_due_before_the_next_read_starts_right_after_this_one() -> None:
    """``Publisher.reads_paused(until)``: stdin's next read is a tick at ``until``, so nothing newer is counted
    before it. A publication due by then starts at once (it would publish the same, newest report); one due later
    waits for its time (the next read may bring a newer report), and so does one while a scrape is due."""
    loop = asyncio.new_event_loop()
    state = _state_with_reports(1)
    collector = ExporterCollector(state)
    publisher = collector.publisher
    publisher.attach(loop)
    publisher.publish_now()  # the first report published: later ones wait for the next scrape
    publisher._last_scrape, publisher._gap = loop.time(), 3600.0  # the next scrape an hour away
    state.apply(orjson.loads(_report(1)))
    publisher.report_applied()
    timer = publisher._timer
    assert timer is not None and timer.when() > loop.time()  # put off until just before that scrape
    due = timer.when()
    publisher.reads_paused(due - 1.0)  # the next read comes first: wait for it
    assert publisher._timer is timer and not timer.cancelled() and publisher.publications == 1
    publisher._last_scrape, publisher._gap = loop.time() - 10.0, 10.0  # a scrape is due right now: hold
    publisher.reads_paused(due + 1.0)
    assert publisher._timer is timer and not timer.cancelled() and publisher.publications == 1
    publisher._last_scrape, publisher._gap = loop.time(), 3600.0
    publisher.reads_paused(due + 1.0)  # nothing counted before the publication's time: it starts now
    assert timer.cancelled() and publisher._timer is None
    deadline = time.monotonic() + DEADLINE
    while publisher.publications < 2:
        assert time.monotonic() < deadline
        loop.run_until_complete(asyncio.sleep(0.01))
    assert _which_reports(gzip.decompress(collector.body([], False, True)).decode()) == {1.0}
    loop.close()
