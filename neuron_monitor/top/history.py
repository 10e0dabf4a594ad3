"""History for `neuron-monitor-top`: the last minutes of each device's and core's figures, and sparklines of them.

`History.add` takes one screen model (`top.model.Screen`) and appends, per device, its utilization (percent),
memory used (percent of the device's memory, or bytes when the report has no size) and power, and per
NeuronCore its utilization. Each series is a ring buffer of ``capacity`` points, and at most ``max_series``
series are kept (a report naming a million cores costs no more than the cap), so memory is bounded whatever the
input. A report older than the newest one seen (a replay moved back) starts the history afresh, so a graph is
always one stretch of time.

`sparkline` draws the newest points of a series as block characters (U+2581..U+2588), one point per column,
right-aligned, against a fixed scale (0-100 % for utilization), so equal heights mean equal values everywhere.
`braille` draws them as a graph ``rows`` characters high in braille patterns (U+2800..U+28FF), as btop and nvtop
do: each character holds 2 points side by side and 4 dots of height, so a graph shows twice the points of a
sparkline as wide and ``4 x rows`` levels; each point is a column of dots filled from the bottom.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

from neuron_monitor.top.model import Screen

BLOCKS = "▁▂▃▄▅▆▇█"
CAPACITY = 600  # points per series: 10 minutes at the default 1 s period
MAX_SERIES = 4096

UTIL = "util"
MEMORY = "mem"
POWER = "power"

Key = tuple[str, int, str]  # ("dev" | "core" | "all", index, UTIL | MEMORY | POWER), ("host", 0, a host bar's history)


class History:
    """Bounded ring buffers of per-device and per-core figures, fed one screen model per report."""

    def __init__(self, capacity: int = CAPACITY, max_series: int = MAX_SERIES) -> None:
        self.capacity = max(1, capacity)
        self.max_series = max(1, max_series)
        self._series: dict[Key, deque[float | None]] = {}
        self.points = 0  # screens added since the last reset
        self.last_time: float | None = None

    def __len__(self) -> int:
        return len(self._series)

    def clear(self) -> None:
        self._series.clear()
        self.points = 0
        self.last_time = None

    def add(self, screen: Screen, at: float | None = None) -> None:
        """Append one report's figures; ``at`` (the report's time) older than the last one starts afresh."""
        if at is not None and self.last_time is not None and at < self.last_time:
            self.clear()
        if at is not None:
            self.last_time = at
        self.points += 1
        for d in screen.devices:
            self._append(("dev", d.index, UTIL), d.utilization)
            used = d.memory_used
            share = 100.0 * used / d.memory_total if d.memory_total and used is not None else None
            self._append(("dev", d.index, MEMORY), share)
            self._append(("dev", d.index, POWER), d.power)
        for c in screen.cores:
            self._append(("core", c.index, UTIL), c.utilization)
        utils = [d.utilization for d in screen.devices if d.utilization is not None]
        self._append(("all", 0, UTIL), sum(utils) / len(utils) if utils else None)
        known = [(d.memory_used, d.memory_total or 0) for d in screen.devices if d.memory_used is not None]
        used, total = sum(u for u, _ in known), sum(t for _, t in known)
        self._append(("all", 0, MEMORY), 100.0 * used / total if total else None)  # of the devices whose is known
        powers = [d.power for d in screen.devices if d.power is not None]
        self._append(("all", 0, POWER), sum(powers) / len(powers) if powers else None)
        for bar in screen.host:  # the host line's bars that declare a history graph (the CPU busy share)
            if bar.history:
                self._append(("host", 0, bar.history), bar.percent)

    def _append(self, key: Key, value: float | None) -> None:
        ring = self._series.get(key)
        if ring is None:
            if len(self._series) >= self.max_series:
                return
            ring = self._series[key] = deque([None] * min(self.capacity, max(0, self.points - 1)), maxlen=self.capacity)
        ring.append(value)

    def series(self, kind: str, index: int, what: str) -> Sequence[float | None]:
        """The points of one series, oldest first (empty when never seen)."""
        return tuple(self._series.get((kind, index, what), ()))

    def peak(self, kind: str, index: int, what: str) -> float | None:
        """The largest point of a series (None when it has none)."""
        values = [v for v in self._series.get((kind, index, what), ()) if v is not None]
        return max(values) if values else None


def sparkline(values: Iterable[float | None], width: int, top: float = 100.0) -> str:
    """The newest ``width`` points as block characters against 0..``top`` (a gap for a missing point), padded
    with spaces on the left to exactly ``width`` characters."""
    if width <= 0:
        return ""
    points = list(values)[-width:]
    out = []
    scale = top if top > 0 else 1.0
    for v in points:
        if v is None or not math.isfinite(v):
            out.append(" ")
            continue
        level = round(max(0.0, min(1.0, v / scale)) * (len(BLOCKS) - 1))
        out.append(BLOCKS[level])
    return " " * (width - len(out)) + "".join(out)


# the dot bits of a braille pattern (U+2800 + bits), per column (left: the older point), from the bottom row up
_LEFT_DOTS = (0x40, 0x04, 0x02, 0x01)
_RIGHT_DOTS = (0x80, 0x20, 0x10, 0x08)


def _dots(value: float | None, levels: int, scale: float) -> int:
    """How many dots high a point stands (0 for a gap; at least 1 for any value, so an idle series shows)."""
    if value is None or not math.isfinite(value):
        return 0
    return max(1, round(max(0.0, min(1.0, value / scale)) * levels))


def braille(values: Iterable[float | None], width: int, rows: int = 1, top: float = 100.0) -> list[str]:
    """The newest ``2 * width`` points as a braille graph: ``rows`` strings (top row first), each exactly
    ``width`` characters, against 0..``top``; older time is padded with spaces on the left."""
    if width <= 0 or rows <= 0:
        return [""] * max(0, rows)
    points = list(values)[-2 * width :]
    if len(points) % 2:
        points.insert(0, None)  # the newest point always lands in a right-hand column
    levels = 4 * rows
    scale = top if top > 0 else 1.0
    heights = [_dots(v, levels, scale) for v in points]
    pad = width - len(heights) // 2
    out: list[str] = []
    for row in range(rows - 1, -1, -1):  # from the top row down
        base = 4 * row  # dots below this row
        cells = []
        for i in range(0, len(heights), 2):
            bits = 0
            for h, dots in ((heights[i], _LEFT_DOTS), (heights[i + 1], _RIGHT_DOTS)):
                for d in range(max(0, min(4, h - base))):
                    bits |= dots[d]
            cells.append(chr(0x2800 + bits))
        out.append(" " * pad + "".join(cells))
    return out
