"""The Trace Event Format checker itself rejects what Perfetto would mis-read (so trace tests can fail)."""

from __future__ import annotations

from typing import Any

import pytest

from . import tef

GOOD: list[dict[str, Any]] = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
    {"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 1, "args": {"v": 1}},
    {"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 1},
    {"ph": "X", "name": "x", "pid": 1, "tid": 2, "ts": 2, "dur": 5},
    {"ph": "X", "name": "y", "pid": 1, "tid": 2, "ts": 3, "dur": 1},
    {"ph": "E", "name": "b", "pid": 1, "tid": 2, "ts": 9},
    {"ph": "i", "s": "g", "name": "i", "pid": 1, "tid": 2, "ts": 9},
]


def test_good_events_pass() -> None:
    tef.check_events(GOOD)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"ph": "Q", "name": "q", "pid": 1, "tid": 1, "ts": 1}, "unknown phase"),
        ({"ph": "C", "name": "c", "pid": "1", "tid": 0, "ts": 1, "args": {"v": 1}}, "pid is not an integer"),
        ({"ph": "C", "name": "c", "pid": 1, "tid": 0, "args": {"v": 1}}, "ts is not"),
        ({"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 5, "args": {"v": "x"}}, "counter args"),
        ({"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 0, "args": {"v": 2}}, "goes back in time"),
        ({"ph": "X", "name": "z", "pid": 1, "tid": 2, "ts": 10}, "non-negative dur"),
        ({"ph": "X", "name": "z", "pid": 1, "tid": 2, "ts": 0, "dur": 1}, "goes back in time"),
        ({"ph": "E", "name": "z", "pid": 1, "tid": 3, "ts": 10}, "E without an open B"),
        ({"ph": "B", "name": "z", "pid": 1, "tid": 3, "ts": 10}, "never ended"),
        ({"ph": "M", "name": "thread_name", "pid": 1, "args": {"name": "t"}}, "without tid"),
        ({"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "args": {}}, "without args.sort_index"),
        ({"ph": "i", "s": "x", "name": "i", "pid": 1, "tid": 2, "ts": 20}, "instant scope"),
    ],
)
def test_bad_events_are_rejected(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(tef.TraceFormatError, match=message):
        tef.check_events([*GOOD, bad])


def test_partial_overlap_of_slices_is_rejected() -> None:
    events = [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
    ]
    with pytest.raises(tef.TraceFormatError, match="overlaps"):
        tef.check_events(events)


def test_mismatched_end_name_is_rejected() -> None:
    events = [
        {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "E", "name": "b", "pid": 1, "tid": 1, "ts": 1},
    ]
    with pytest.raises(tef.TraceFormatError, match="closes B"):
        tef.check_events(events)


def test_nan_in_the_file_is_rejected(tmp_path: Any) -> None:
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents":[{"ph":"C","name":"c","pid":1,"ts":1,"args":{"v":NaN}}]}')
    with pytest.raises(tef.TraceFormatError, match="NaN"):
        tef.check_trace(p)
