"""The top view's history: bounded ring buffers per series, sparklines, and a graph that is one stretch of time."""

from __future__ import annotations

from neuron_monitor.top.history import BLOCKS, MEMORY, POWER, UTIL, History, sparkline
from neuron_monitor.top.model import Core, Device, Screen


def _screen(util: float, devices: int = 2, t: float = 0.0) -> Screen:
    devs = tuple(
        Device(index=i, utilization=util, cores=(i,), memory={"tensors": 50}, memory_total=100, power=util / 2)
        for i in range(devices)
    )
    cores = tuple(Core(index=i, device=i, utilization=util, tags=("a",), memory_used=0) for i in range(devices))
    return Screen(devices=devs, cores=cores, report_time=t)


def test_each_series_keeps_at_most_capacity_points() -> None:
    h = History(capacity=5)
    for i in range(100):
        h.add(_screen(float(i)), at=float(i))
    assert h.series("dev", 0, UTIL) == (95.0, 96.0, 97.0, 98.0, 99.0)
    assert h.series("dev", 1, MEMORY) == (50.0,) * 5
    assert h.series("dev", 1, POWER)[-1] == 49.5
    assert h.series("core", 1, UTIL)[-1] == 99.0
    assert h.points == 100


def test_the_number_of_series_is_bounded_whatever_the_report_names() -> None:
    h = History(capacity=3, max_series=10)
    h.add(_screen(1.0, devices=1000), at=1.0)
    assert len(h) == 10
    h.add(_screen(2.0, devices=1000), at=2.0)
    assert len(h) == 10


def test_a_series_that_appears_later_is_aligned_with_the_others() -> None:
    h = History(capacity=4)
    h.add(_screen(10.0, devices=1), at=1.0)
    h.add(_screen(20.0, devices=2), at=2.0)
    assert h.series("dev", 1, UTIL) == (None, 20.0)
    assert h.series("dev", 0, UTIL) == (10.0, 20.0)


def test_a_report_older_than_the_newest_starts_the_history_afresh() -> None:
    h = History()
    h.add(_screen(10.0), at=100.0)
    h.add(_screen(20.0), at=101.0)
    h.add(_screen(30.0), at=50.0)  # a replay moved back
    assert h.series("dev", 0, UTIL) == (30.0,)
    assert h.peak("dev", 0, UTIL) == 30.0


def test_sparkline_is_exactly_width_characters_newest_on_the_right() -> None:
    assert sparkline([], 5) == "     "
    assert sparkline([0.0, 100.0], 4) == "  " + BLOCKS[0] + BLOCKS[-1]
    assert sparkline([50.0, None, 100.0], 3) == BLOCKS[4] + " " + BLOCKS[-1]
    assert sparkline([float(i) for i in range(1000)], 10) == BLOCKS[-1] * 10  # clamped to the scale
    assert sparkline([-5.0, 1e300], 2) == BLOCKS[0] + BLOCKS[-1]
    assert sparkline([1.0], 0) == ""
    assert len(sparkline(range(50), 7)) == 7  # type: ignore[arg-type]


def test_braille_graph_two_points_per_character_filled_from_the_bottom() -> None:
    from neuron_monitor.top.history import braille

    assert braille([], 3, 2) == ["   ", "   "]
    assert braille([100.0, 0.0], 1, 1) == ["\u28c7"]  # left column full (dots 1,2,3,7), right: one dot for 0
    top, bottom = braille([100.0, 50.0, None, 25.0], 2, 2)
    assert len(top) == len(bottom) == 2  # exactly the width, in characters of one cell each
    assert top == "\u2847\u2800" and bottom == "\u28ff\u28a0"  # 50% = 4 of 8 dots: all of the bottom row
    assert braille([float("nan"), float("inf")], 1, 1) == ["\u2800"]  # not a number: a gap
    many = braille(list(range(0, 101)), 10, 3)  # only the newest 2 x width points
    assert all(len(row) == 10 for row in many) and many[0][-1] == "\u28ff"
    assert braille([50.0], 4, 1) == ["   \u28a0"]  # the newest point is always in a right-hand column
