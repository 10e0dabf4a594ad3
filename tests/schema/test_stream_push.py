"""Pushing stdin's chunks through ``LineBuffer`` and ``ReportStream.decode`` reads exactly what iterating a
``ReportStream`` over the same bytes reads: the same reports, the same counts of lines, bad and oversize lines,
however the bytes are cut into chunks."""

from __future__ import annotations

import io
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.schema.stream import LineBuffer, ReportStream

LIMIT = 64
REPORT = orjson.dumps({"system_data": {"memory_info": {"period": 1.0, "error": ""}}})  # 57 bytes: fits LIMIT
lines = st.sampled_from([REPORT, b"", b"   ", b"not json", b"[1]", b"x" * (LIMIT + 1), b"y" * 300, REPORT[:-1], b"{}"])


def _pull(data: bytes) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    stream = ReportStream(io.BufferedReader(io.BytesIO(data)), max_line_bytes=LIMIT)  # type: ignore[arg-type]
    reports = list(stream)
    s = stream.stats
    return reports, (s.lines, s.reports, s.bad_lines, s.oversize_lines)


def _push(data: bytes, cuts: list[int]) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    stream = ReportStream(io.BytesIO(b""), max_line_bytes=LIMIT)  # type: ignore[arg-type]
    buffer = LineBuffer(LIMIT)
    reports: list[dict[str, Any]] = []
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    got: list[bytes | None] = []
    for piece in pieces:
        if piece:
            got += buffer.feed(piece)
    got += buffer.finish()
    for line in got:
        if line is None:
            stream.oversize()
        elif (report := stream.decode(line)) is not None:
            reports.append(report)
    s = stream.stats
    return reports, (s.lines, s.reports, s.bad_lines, s.oversize_lines)


@settings(max_examples=400, deadline=None)
@given(st.lists(lines, max_size=8), st.booleans(), st.data())
def test_push_reads_what_pull_reads(body: list[bytes], final_newline: bool, data: st.DataObject) -> None:
    stream_bytes = b"\n".join(body) + (b"\n" if final_newline and body else b"")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream_bytes)), max_size=6)))
    assert _push(stream_bytes, cuts) == _pull(stream_bytes)


def test_an_oversize_line_is_never_held_whole() -> None:
    buffer = LineBuffer(LIMIT)
    for _ in range(1000):
        assert buffer.feed(b"z" * 1000) == []
        assert buffer._size <= LIMIT  # the bound is the point of the test
    assert buffer.feed(b"tail\n" + REPORT + b"\n") == [None, REPORT]
