"""The fast renderer (``SampleRenderer``, ``format_values``) writes exactly what its careful twin writes.

``render_families`` is held to client_python's output elsewhere; here the renderer that keeps each family's lines
between scrapes must match it scrape after scrape, while series come and go, values change (including -0.0, NaN,
infinities, integers and values in Go's exponent range) and label values need escaping.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.utils import floatToGoString

from neuron_monitor.exporters.prometheus.collector import SELF_METRICS, ExporterCollector
from neuron_monitor.exporters.prometheus.exposition import (
    MetricTable,
    Reading,
    Row,
    SampleRenderer,
    format_values,
    render_families,
)
from neuron_monitor.exporters.prometheus.families import COUNTER, GAUGE, INFO, Family
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.schema.stream import StreamStats
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reports"

values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e6, 999999.9999, 1e16, 1e11, 123456789.0, 5e-324, -1e7]),
    st.integers(min_value=-(10**12), max_value=10**12),
)
label_values = st.text(alphabet=st.sampled_from(["a", "0", '"', "\\", "\n", "é", " ", "-"]), max_size=4)


def _family(name: str, kind: str, names: tuple[str, ...], samples: dict[tuple[str, ...], float]) -> Family:
    return Family(name, kind, f"help of {name} with \\ and\nnewline", names, samples)


@st.composite
def report_sequences(draw: st.DrawFn) -> list[list[Family]]:
    """A few scrapes of the same families whose series and values change between scrapes."""
    shapes = draw(
        st.lists(
            st.tuples(
                st.sampled_from([GAUGE, COUNTER, INFO]),
                st.lists(st.sampled_from(["b", "a", "zz", "c"]), unique=True, max_size=3),
            ),
            min_size=1,
            max_size=4,
        )
    )
    scrapes = []
    for _ in range(draw(st.integers(1, 4))):
        fams = []
        for i, (kind, names) in enumerate(shapes):
            keys = draw(st.lists(st.tuples(*[label_values for _ in names]), unique=True, max_size=5))
            fams.append(_family(f"fam{i}", kind, tuple(names), {k: draw(values) for k in keys}))
        scrapes.append(fams)
    return scrapes


@settings(max_examples=300, deadline=None)
@given(report_sequences())
def test_renderer_matches_its_careful_twin_scrape_after_scrape(scrapes: list[list[Family]]) -> None:
    renderer = SampleRenderer()
    for families in scrapes:
        for openmetrics in (False, True):
            assert renderer.render(families, openmetrics) == render_families(families, openmetrics)


@settings(max_examples=500, deadline=None)
@given(st.lists(values, max_size=20))
def test_format_values_is_float_to_go_string(vals: list[float]) -> None:
    assert format_values(vals) == [floatToGoString(v) for v in vals]


def test_sign_of_zero_and_nan_are_not_mistaken_for_unchanged_values() -> None:
    renderer = SampleRenderer()
    for value in (0.0, -0.0, 0.0, math.nan, math.nan, math.inf, 1.0):
        fam = [_family("x", GAUGE, ("a",), {("1",): value})]
        assert renderer.render(fam, False) == render_families(fam, False)


def _real_report_sequence() -> list[dict[str, object]]:
    reports: list[dict[str, object]] = []
    for path in sorted(FIXTURES.glob("*.json*")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                reports.append(orjson.loads(line))
    for i in range(6):  # runtimes come and go, counts and values change
        rts = [
            runtime(100 + d, f"job-{d}", [2 * d, 2 * d + 1], completed=i * d, utilization=10.0 * i)
            for d in range(i % 4 + 1)
        ]
        reports.append(trn2_report(rts, report_time=1.7e9 + i, ecc=i % 2))
    return reports


def test_served_reports_render_as_the_careful_twin_does() -> None:
    state = ExporterState()
    renderer = SampleRenderer()
    rendered = 0
    for report in _real_report_sequence():
        if not state.apply(report):
            continue
        view = state.view()
        assert view.shaped is not None
        for openmetrics in (False, True):
            assert renderer.render(view.shaped.families, openmetrics) == render_families(
                view.shaped.families, openmetrics
            )
        rendered += 1
    assert rendered >= 6


@settings(max_examples=300, deadline=None)
@given(report_sequences())
def test_a_metric_table_writes_what_the_renderer_writes(scrapes: list[list[Family]]) -> None:
    """A table whose rows read the families of each scrape (in turn, the same series with later values) writes,
    from the template its first scrape built, exactly what the renderer writes for those families, and its
    careful twin gives those families (families without samples keep their help lines)."""
    shape = scrapes[0]
    rows = [Row(f.name, f.kind, f.help, lambda src, i=i: src[i], f.labelnames) for i, f in enumerate(shape)]
    for openmetrics in (False, True):
        table: MetricTable[list[Reading]] = MetricTable(rows)
        for later in [shape, *scrapes]:
            again = [Family(f.name, f.kind, f.help, f.labelnames, {}) for f in shape]
            it = iter(s for fam in later for s in fam.samples.values())
            for fam, blank in zip(shape, again, strict=True):
                blank.samples = {k: next(it, 1.5) for k in fam.samples}
            source: list[Reading] = [
                dict(f.samples) if f.labelnames else f.samples.get((), 1.5) if f.samples else None for f in again
            ]
            served = [f for f, r in zip(again, source, strict=True) if r is not None]
            assert table.text(source, openmetrics) == SampleRenderer().render(served, openmetrics)
            assert render_families(table.families(source), openmetrics) == render_families(served, openmetrics)


def _states_of_a_stream() -> Iterator[tuple[ExporterState, StreamStats]]:
    """One exporter's state after each step of a stream that touches every self-metric's shape (no report yet,
    reports with and without report_time, failing groups, a malformed report, bad input, end of input), with an
    empty state between steps so that templates are reused across shapes."""
    state, stats = ExporterState(), StreamStats()
    failing = trn2_report(report_time=1.7e9 + 50)
    failing["system_data"]["vcpu_usage"] = {"period": 1.0, "error": "open /proc/stat: denied"}
    no_time = trn2_report(report_time=1.7e9 + 60)
    del no_time["report_time"]
    negative = trn2_report([runtime(7, "neg", [0], completed=-5)], report_time=1.7e9 + 70)
    stream: list[object] = [None, *_real_report_sequence(), failing, no_time, {"neuron_runtime_data": 5}, negative]
    for item in stream:
        if isinstance(item, dict):
            stats.lines += 1
            state.apply(item)
        yield state, stats
        yield ExporterState(), StreamStats()
    state.input_closed = True
    stats.bad_lines, stats.oversize_lines = 3, 1
    yield state, stats


def test_self_metrics_template_writes_what_their_families_render_to() -> None:
    collector = ExporterCollector(ExporterState())
    shapes: set[tuple[object, ...]] = set()
    for state, stats in _states_of_a_stream():
        collector.state, collector.stream_stats = state, stats
        view = state.view()
        shapes.add(tuple(f.name for f in collector.self_families(view)))
        for openmetrics in (False, True):
            careful = render_families(collector.self_families(view), openmetrics)
            assert SELF_METRICS.text(collector._seen(view), openmetrics) == careful  # through the kept templates
    assert len(shapes) >= 3  # no report yet, reports with and without report_time
    assert state.rejected_reports == 1 and sum(state.bad_input_counts().values()) >= 1


def test_connection_counts_are_served_once_there_is_a_front() -> None:
    """``neuron_exporter_connections_closed`` is the table's last row: absent without an HTTP front (a replay,
    OTLP), every reason with one, templated as its family renders."""
    state = ExporterState()
    state.apply(trn2_report(report_time=1.7e9))
    collector = ExporterCollector(state)
    view = state.view()
    assert "neuron_exporter_connections_closed" not in {f.name for f in collector.self_families(view)}
    collector.front = SimpleNamespace(closes={"write_timeout": 3, "evicted": 1})  # type: ignore[assignment]
    closed = collector.self_families(view)[-1]
    assert closed.name == "neuron_exporter_connections_closed"
    assert closed.samples[("write_timeout",)] == 3.0 and closed.samples[("refused",)] == 0.0
    for openmetrics in (False, True):
        careful = render_families(collector.self_families(view), openmetrics)
        assert SELF_METRICS.text(collector._seen(view), openmetrics) == careful


def test_self_text_gives_what_the_table_gives_and_again_only_while_nothing_changed() -> None:
    """``ExporterCollector.self_text`` (the self-metrics given again while nothing they read changed) against its
    plain twin ``SELF_METRICS.text``: equal text at every step of a stream that touches every self-metric, before
    and after lines are read, connections close and stdin ends; the same object only while nothing moved."""
    collector = ExporterCollector(ExporterState())
    collector.front = SimpleNamespace(closes={"write_timeout": 0, "evicted": 0})  # type: ignore[assignment]
    for state, stats in _states_of_a_stream():
        collector.state, collector.stream_stats = state, stats
        for openmetrics in (False, True):
            view = state.view()
            first = collector.self_text(view, openmetrics)
            assert first == SELF_METRICS.text(collector._seen(view), openmetrics)
            assert collector.self_text(view, openmetrics) is first  # nothing moved
            closes = collector.front.closes  # type: ignore[union-attr]
            for change in ("lines", "bad_lines", "oversize_lines", "closes", "input"):
                if change == "closes":
                    closes["evicted"] += 1
                elif change == "input":
                    state.close_input()
                else:
                    setattr(stats, change, getattr(stats, change) + 1)
                view = state.view()
                assert collector.self_text(view, openmetrics) == SELF_METRICS.text(collector._seen(view), openmetrics)


@settings(max_examples=300, deadline=None)
@given(report_sequences())
def test_whole_writes_what_the_renderer_writes_scrape_after_scrape(scrapes: list[list[Family]]) -> None:
    """``SampleRenderer.whole`` (a short report's text from one template) against its plain twin ``render`` (and
    so client_python's bytes): the same text for every scrape of families whose series and values change, in
    both formats, the same renderer taking turns between the two."""
    renderer = SampleRenderer()
    for families in scrapes:
        for openmetrics in (False, True):
            assert renderer.whole(families, openmetrics) == render_families(families, openmetrics)
            assert renderer.render(families, openmetrics) == render_families(families, openmetrics)
            assert renderer.whole(families, openmetrics) == render_families(families, openmetrics)


def test_whole_declines_created_samples_and_long_templates() -> None:
    from neuron_monitor.exporters.prometheus.exposition import WHOLE_TEMPLATE_CHARS

    renderer = SampleRenderer()
    counter = _family("c", COUNTER, ("a",), {("1",): 2.0})
    counter.created = {("1",): 1.7e9}
    assert renderer.whole([counter], False) is None
    long = _family("g", GAUGE, ("a",), {("x" * WHOLE_TEMPLATE_CHARS,): 1.0})
    assert renderer.whole([long], False) is None
    assert renderer.render([long], False) == render_families([long], False)


def test_self_text_follows_the_served_report_going_stale_and_fresh_again() -> None:
    """The same report served before and after it goes stale (only time moved): ``self_text`` gives what its twin
    gives each time (``neuron_exporter_up`` and ``_serving`` 1, then 0, then 1 for a new report), never the text
    kept from before."""
    clock = [1000.0]
    state = ExporterState(stale_periods=3, clock=lambda: clock[0])
    collector = ExporterCollector(state)

    def report(i: int) -> None:
        state.apply(trn2_report([runtime(1, "a", [0], period=5.0)], period=5.0, report_time=1.7e9 + 5 * i))

    def up_and_serving() -> tuple[bool, bool]:
        view = state.view()
        text = collector.self_text(view, False)
        assert text == SELF_METRICS.text(collector._seen(view), False)
        return "neuron_exporter_up 1.0\n" in text, "neuron_exporter_serving 1.0\n" in text

    for i in range(4):  # a report every 5 s: a 15 s window
        report(i)
        clock[0] += 5.0
    assert up_and_serving() == (True, True)
    clock[0] += 20.0  # the newest report is 25 s old: stale
    assert up_and_serving() == (False, False)
    report(20)
    assert up_and_serving() == (True, True)
