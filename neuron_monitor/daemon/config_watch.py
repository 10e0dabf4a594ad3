"""Notices that the configuration file changed, without a wake-up of its own when reports are frequent.

`ConfigFileWatcher.poke()` runs after every report and stats the file at most once per ``min_interval`` (1 s);
`run()` is a fallback timer that checks when no report did for ``max_interval`` (5 s), so with reports at least
every few seconds the daemon wakes up only for reports. A change (mtime, size or inode) is acted on once the same
new stamp has been seen by two checks in a row (the editor finished writing); ``on_change`` then runs as a task.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

Stamp = tuple[int, int, int]


def file_stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ConfigFileWatcher:
    def __init__(
        self,
        path: str,
        on_change: Callable[[], Coroutine[Any, Any, None]],
        min_interval: float = 1.0,
        max_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.on_change = on_change
        self.min_interval = min_interval
        self.max_interval = max_interval
        self.clock = clock
        self._stamp = file_stamp(path)
        self._pending: Stamp | None = None
        self._checked = clock()
        self._tasks: set[asyncio.Task[None]] = set()

    def poke(self) -> None:
        """After a report: check the file unless it was checked less than ``min_interval`` ago."""
        if self.clock() - self._checked >= self.min_interval:
            self.check()

    def check(self) -> bool:
        """Stat the file now; True when a settled change was found (and ``on_change`` started)."""
        self._checked = self.clock()
        stamp = file_stamp(self.path)
        if stamp is None or stamp == self._stamp:
            self._pending = None
            return False
        if stamp != self._pending:  # changed: wait for one more check with the same stamp (debounce)
            self._pending = stamp
            return False
        self._stamp, self._pending = stamp, None
        task = asyncio.get_running_loop().create_task(self.on_change())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def run(self) -> None:
        """Check whenever no report has for ``max_interval`` seconds (slow report cadences)."""
        while True:
            await asyncio.sleep(max(0.0, self._checked + self.max_interval - self.clock()))
            if self.clock() - self._checked >= self.max_interval:
                self.check()
