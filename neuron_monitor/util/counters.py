"""How a cumulative counter becomes per-period counts: one rule for every source the project reads.

Every group that reports a count per period from a counter that only grows (the driver's ECC counts and core
counters, EFA's hardware counters, the health group's fault counts, a runtime's data block) turns two readings
into a count with `step`, or with `steps` for many counters at once. The rule (docs/neuron-data.md, "Cumulative
counters"):

1. A counter that could not be read has no count, and the next good read is a new baseline (never a step from a
   value read before the failure: what happened meanwhile is not known).
2. A value above what the source can hold (`Source.top`) is refused: no count, and it is no baseline.
3. The first read (no baseline) is a baseline: no count.
4. A step up larger than the source can make in the elapsed time (`Source.bound`) is refused: no count, and the
   next good read is a new baseline.
5. A counter that goes back was reset (device reset, driver reload, adapter reset): its new value is what it
   counted since, subject to rule 4. It is a wrap instead only when proven: the source is a fixed-width field
   (`Source.width`) and the step across the top, ``2^width - prev + cur``, is both within what the source can
   make in the elapsed time and at most 1/16 of the field (the previous value was in the field's top sixteenth
   and the new one in its bottom). A source whose driver prints 0 when its own read fails
   (`Source.zero_on_failure`) and that drops to exactly 0 is neither: no count, and the next read is a baseline
   (a failed read would otherwise count everything again when the value comes back).

A refused reading is returned as a problem text for the group's ``error``; a baseline or a reset is no problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import sub
from typing import cast

U64_TOP = (1 << 64) - 1
HALF_U64 = (1 << 63) - 1  # the top of a 64-bit count no source here reaches in years at its fastest rate


@dataclass(frozen=True, slots=True)
class Source:
    """What one kind of cumulative counter can do.

    ``rate``: the most it counts per second; ``burst``: counts a step may carry beyond ``rate * dt`` (events
    accounted for at once); ``top``: the largest value a real reading holds; ``width``: bits of a fixed-width field
    that may wrap (None: a drop is never a wrap); ``zero_on_failure``: the driver prints 0 when it cannot read it.
    """

    rate: float = math.inf
    burst: float = 0.0
    top: int = HALF_U64
    width: int | None = None
    zero_on_failure: bool = False

    def bound(self, dt: float) -> float:
        """The largest step the source can make in ``dt`` seconds."""
        bound = self.rate * max(0.0, dt) + self.burst if self.rate != math.inf else math.inf
        if self.width is not None:
            bound = min(bound, float((1 << self.width) - 1))
        return min(bound, float(self.top))


# (count or None, the next baseline or None, a problem text or None)
Step = tuple[int | None, int | None, str | None]


def step(prev: int | None, cur: int | None, dt: float, src: Source) -> Step:
    """One counter's count from its baseline ``prev`` to the reading ``cur`` (None: not read) over ``dt``
    seconds, the next baseline, and why the reading was refused (see the module docstring)."""
    if cur is None:
        return None, None, None
    if cur > src.top or cur < 0:
        return None, None, f"holds {cur}, past what it can ({src.top})"
    if prev is None:
        return None, cur, None
    bound = src.bound(dt)
    if cur >= prev:
        d = cur - prev
        if d > bound:
            return None, None, _too_much(f"grew by {d}", dt, bound)
        return d, cur, None
    w = src.width
    if w is not None:
        across = cur + (1 << w) - prev
        if across <= bound and across <= 1 << (w - 4):
            return across, cur, None  # a wrap, proven
    if src.zero_on_failure and cur == 0:
        return None, None, None  # a reset or a failed read: no count either way, the next read is a baseline
    if cur > bound:
        return None, None, _too_much(f"went back from {prev} to {cur}", dt, bound)
    return cur, cur, None  # a reset: everything since is new


def _too_much(what: str, dt: float, bound: float) -> str:
    return f"{what} in {dt:.3f} s, more than it can count (at most {bound:.3g}); left out, counting from its next read"


def steps(
    prev: list[int | None], cur: list[int | None], dt: float, src: Source
) -> tuple[list[int | None], list[int | None], list[tuple[int, str]]]:
    """`step` of many counters of one kind at once: the counts, the next baselines and the refused ones (index,
    problem). When every counter was read, has a baseline and grew within the bound (the usual case), one
    ``map(sub, ...)`` computes them all."""
    if None not in cur and None not in prev:
        now, before = cast("list[int]", cur), cast("list[int]", prev)
        d: list[int] = list(map(sub, now, before))
        if not d or (min(d) >= 0 and max(d) <= src.bound(dt) and max(now) <= src.top):
            return cast("list[int | None]", d), list(cur), []
    counts: list[int | None] = []
    nexts: list[int | None] = []
    bad: list[tuple[int, str]] = []
    for i, (p, c) in enumerate(zip(prev, cur, strict=True)):
        n, b, problem = step(p, c, dt, src)
        counts.append(n)
        nexts.append(b)
        if problem is not None:
            bad.append((i, problem))
    return counts, nexts, bad
