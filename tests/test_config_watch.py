"""ConfigFileWatcher: checks ride on reports (rate-limited), a fallback timer covers slow cadences, changes are
acted on once settled."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from neuron_monitor.daemon.config_watch import ConfigFileWatcher


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _rewrite(path: Path, text: str, mtime_ns: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


async def test_pokes_check_at_most_once_per_interval_and_changes_apply_once_settled(tmp_path: Path) -> None:
    conf = tmp_path / "m.conf"
    _rewrite(conf, "{}", 1_000_000_000)
    clock = Clock()
    changes: list[str] = []

    async def on_change() -> None:
        changes.append(conf.read_text())

    w = ConfigFileWatcher(str(conf), on_change, clock=clock)
    _rewrite(conf, '{"period": "1s"}', 2_000_000_000)
    clock.t += 0.5
    w.poke()  # too soon after the last check: the file is not even looked at
    assert w._pending is None
    clock.t += 0.5
    w.poke()  # first sight of the new stamp: pending, not yet applied
    assert w._pending is not None
    clock.t += 1.0
    w.poke()  # the same stamp again: applied once
    await asyncio.sleep(0)
    assert changes == ['{"period": "1s"}']
    clock.t += 1.0
    w.poke()
    await asyncio.sleep(0)
    assert changes == ['{"period": "1s"}']  # no change since: nothing more


async def test_a_file_still_being_written_waits_for_a_stable_stamp(tmp_path: Path) -> None:
    conf = tmp_path / "m.conf"
    _rewrite(conf, "{}", 1_000_000_000)
    clock = Clock()
    calls = 0

    async def on_change() -> None:
        nonlocal calls
        calls += 1

    w = ConfigFileWatcher(str(conf), on_change, clock=clock)
    for i in range(3):  # a new stamp at every check: never applied
        _rewrite(conf, "{" + " " * i + "}", 2_000_000_000 + i)
        clock.t += 1.0
        assert not w.check()
    clock.t += 1.0
    assert w.check()
    await asyncio.sleep(0)
    assert calls == 1


async def test_fallback_timer_checks_when_no_report_does(tmp_path: Path) -> None:
    conf = tmp_path / "m.conf"
    _rewrite(conf, "{}", 1_000_000_000)
    applied = asyncio.Event()

    async def on_change() -> None:
        applied.set()

    w = ConfigFileWatcher(str(conf), on_change, min_interval=0.01, max_interval=0.05)
    task = asyncio.create_task(w.run())
    _rewrite(conf, '{"period": "1s"}', 2_000_000_000)
    await asyncio.wait_for(applied.wait(), 5)  # no poke at all: the timer alone noticed it
    task.cancel()
