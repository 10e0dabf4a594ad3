"""Rate-limited logging: one message per interval about a recurring problem, with a count of the ones held back.

limit = LogRateLimit(60.0)
n = limit.hit()           # one more occurrence
if n is not None:         # a message may go out now; n occurrences since the last one (this one included)
    log.warning("skipped a bad line: %s (%d since the last message)", why, n)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class LogRateLimit:
    """Counts occurrences of one kind of problem and lets a message out at most once per ``interval`` seconds."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last = -math.inf
        self._pending = 0

    def hit(self) -> int | None:
        """Count one occurrence; the occurrences since the last message (this one included) when a message may go
        out now, None while the interval since the last message has not passed."""
        self._pending += 1
        now = self._clock()
        if now - self._last < self.interval:
            return None
        self._last = now
        pending, self._pending = self._pending, 0
        return pending


def held_back(n: int, what: str) -> str:
    """The suffix of a rate-limited message for ``n`` occurrences: the ones held back since the last message."""
    return f" ({n - 1} more {what} since the last message)" if n > 1 else ""
