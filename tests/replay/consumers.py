"""Today's consumers as the replay test runs them: report lines in, the bytes a user sees out.

Each function takes the report lines of one recording and returns what one consumer produces from them, made
deterministic where the consumer would read a clock (the exporters get the report's own time as their clock):

- `prometheus_text`: the /metrics body (text 0.0.4) after the first and the last report (every report is ingested),
  then the last body in OpenMetrics, with
  ``--created-series`` and the full series set (``series_detail="full"`` once the exporter has a series budget);
- `emf_lines`: neuron-monitor-cloudwatch ``--output emf`` lines per report with the default dimensions, and for
  the last report with ``--dimensions container-insights --high-resolution --per-vcpu``;
- `trace_json`: ``neuron-monitor-trace`` output for each ``--group-by``;
- `det_output`: ``neuron-monitor-det`` exit status and stdout (the problem lines; its stderr summary is the CLI's
  wording, left out), with the default and a short ``--hang-periods``, and its highlighted trace;
- `top_text`: ``neuron-monitor-top --once`` text (no report age, as in a replay) of the first, a middle and the
  last report at several widths, and of the last report with a tag filter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from neuron_monitor.exporters.cloudwatch.dimensions import DimensionScheme
from neuron_monitor.exporters.cloudwatch.emf import encode_events
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.ingest import decode_line
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.schema.stream import ReportStream
from neuron_monitor.timeline import det_cli, trace_cli
from neuron_monitor.timeline.trace import GROUP_BY
from neuron_monitor.top.layout import Frame, plain, render
from neuron_monitor.top.model import screen_from_report

NAMESPACE = "neuron_monitor"


def full_detail_options() -> ShapeOptions:
    """The exporter's options that serve every series it can (issue 30's series budget off, when it exists)."""
    names = {f.name for f in dataclasses.fields(ShapeOptions)}
    if "series_detail" in names:
        return ShapeOptions(series_detail="full")  # type: ignore[call-arg]
    return ShapeOptions()


def prometheus_text(lines: list[bytes]) -> bytes:
    now = [0.0]
    state = ExporterState(full_detail_options(), clock=lambda: now[0], wall_clock=lambda: now[0], created_series=True)
    collector = ExporterCollector(state)
    out = io.BytesIO()
    stream = ReportStream(io.BytesIO())
    for i, raw in enumerate(lines):
        report, line = decode_line(stream, raw.rstrip(b"\n"))  # as the exporter takes it in (thin when it can)
        assert report is not None
        now[0] = float(report.get("report_time") or 1.7e9 + i)
        accepted = state.apply(report, line)
        out.write(f"### report {i} accepted={accepted}\n".encode())
        if i in (0, len(lines) - 1):  # the first and the last body; counters carry every report in between
            out.write(collector.scrape([], False))
    out.write(b"### openmetrics\n")
    out.write(collector.scrape([], True))
    return out.getvalue()


def emf_lines(lines: list[bytes]) -> bytes:
    variants = {
        "default": ReportMapper(),
        "container-insights": ReportMapper(
            DimensionScheme("container-insights", cluster_name="replay", node_name="node-1"),
            MapOptions(high_resolution=True, per_vcpu=True),
        ),
    }
    out = io.BytesIO()
    for name, mapper in variants.items():
        for i, line in enumerate(lines):
            if name != "default" and i != len(lines) - 1:
                continue  # the second variant on the last report only (the fixtures stay small)
            out.write(f"### {name} report {i}\n".encode())
            for event in encode_events(mapper.map(orjson.loads(line), now=1.7e9 + i), NAMESPACE):
                out.write(event)
    return out.getvalue()


def _recording(lines: list[bytes], tmp: Path) -> str:
    path = tmp / "rec.jsonl"
    path.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))
    return str(path)


def trace_json(lines: list[bytes]) -> bytes:
    out = io.BytesIO()
    with tempfile.TemporaryDirectory() as d:
        rec = _recording(lines, Path(d))
        for group_by in GROUP_BY:
            target = Path(d) / f"trace-{group_by}.json"
            code = trace_cli.main([rec, "-o", str(target), "-q", "--group-by", group_by])
            out.write(f"### --group-by {group_by} exit={code}\n".encode())
            out.write(target.read_bytes())
            out.write(b"\n")
    return out.getvalue()


def det_output(lines: list[bytes]) -> bytes:
    out = io.BytesIO()
    with tempfile.TemporaryDirectory() as d:
        rec = _recording(lines, Path(d))
        for extra in ([], ["--hang-periods", "2"]):
            target = Path(d) / "det-trace.json"
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = det_cli.main([rec, "-o", str(target), *extra])
            out.write(f"### det {' '.join(extra)} exit={code}\n".encode())
            out.write(stdout.getvalue().encode())
            out.write(b"### trace\n")
            out.write(target.read_bytes() if target.exists() else b"(none)")
            out.write(b"\n")
    return out.getvalue()


@contextlib.contextmanager
def _utc() -> Iterator[None]:
    """The local time zone set to UTC (top shows the report's time in local time)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def top_text(lines: list[bytes]) -> bytes:
    with _utc():
        return _top_text(lines)


def _top_text(lines: list[bytes]) -> bytes:
    out = io.BytesIO()
    last = len(lines) - 1
    for i in sorted({0, last // 2, last}):
        report = orjson.loads(lines[i])
        for width in (72, 100, 120, 160):
            out.write(f"### report {i} width {width}\n".encode())
            out.write(plain(render(Frame(screen=screen_from_report(report)), width, None)).encode())
    pattern = re.compile("[02468]$")
    screen = screen_from_report(orjson.loads(lines[last]), pattern)
    out.write(f"### report {last} width 160 filter {pattern.pattern}\n".encode())
    out.write(plain(render(Frame(screen=screen, filter_text=pattern.pattern), 160, None)).encode())
    return out.getvalue()


CONSUMERS = {
    "prometheus": prometheus_text,
    "emf": emf_lines,
    "trace": trace_json,
    "det": det_output,
    "top": top_text,
}
