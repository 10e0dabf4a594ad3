"""Where `neuron-monitor-top` gets reports: its own collection, report lines on a stream, or a recording.

Every source hands what it meets to a `Feed`: ``report(obj)`` for each valid report, ``problem(text)`` for input
it skipped (a broken line), ``ended(text)`` when no more reports will come (EOF: the daemon stopped). None of them
raises on bad input.

- `CollectSource` runs the daemon's own `Collector` and `Scheduler` in this process (1 s period unless ``-c``
  names a configuration), on a simulated host with ``--simulate``.
- `StreamSource` reads report lines from a file descriptor (stdin, a pipe from `neuron-monitor`) in a thread.
- `Replay` holds a recording (`neuron-monitor --record FILE`, or a JSON-lines capture) for playback with pause and
  seek; each report is kept compressed (a trn2.48xlarge report is about 80 KB of JSON, 10-20 KB deflated).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import dataclasses
import threading
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO, Protocol

import orjson

from neuron_monitor.daemon.added_groups import with_health_groups
from neuron_monitor.daemon.config import Plan, load_plan
from neuron_monitor.schema.read import read_report
from neuron_monitor.schema.stream import LineBuffer, chunks, validate_report

MAX_LINE_BYTES = 32 * 1024 * 1024
OVERSIZE = b"\0oversize"  # what `StreamSource._lines` yields for a line past MAX_LINE_BYTES
TOP_PERIOD = 1.0  # seconds, every group, when no configuration file is given


class Feed(Protocol):
    def report(self, report: dict[str, Any]) -> None: ...

    def problem(self, text: str) -> None: ...

    def ended(self, text: str) -> None: ...


def parse_line(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """One report line -> (report, "") or (None, why it is not a report)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        return None, f"not JSON ({e})"
    why = validate_report(obj)
    return (obj, "") if not why else (None, why)


def top_plan(config_file: str | None) -> Plan:
    """The configuration's plan (an AWS-only one with the health groups added, as the daemon does), or every group
    at 1 s for every runtime when no file is given."""
    plan = load_plan(config_file)
    if config_file is not None:
        return with_health_groups(plan)[0]
    return dataclasses.replace(
        plan,
        source="(neuron-monitor-top defaults: every group every 1 s)",
        system_groups=tuple((g, TOP_PERIOD) for g, _ in plan.system_groups),
        runtime_scopes=tuple(
            dataclasses.replace(s, groups=tuple((g, TOP_PERIOD) for g, _ in s.groups)) for s in plan.runtime_scopes
        ),
        root_period=TOP_PERIOD,
    )


class CollectSource:
    """Collects reports in this process with the daemon's scheduler; each report goes to the feed."""

    def __init__(self, args: argparse.Namespace, plan: Plan, root: str) -> None:
        from neuron_monitor.daemon.cli import instance_source
        from neuron_monitor.daemon.scheduler import Collector, Scheduler
        from neuron_monitor.host.rootfs import RootFS
        from neuron_monitor.neuron.backend import open_backend

        rootfs = RootFS(root)
        self.backend = open_backend(rootfs)
        self.instance = instance_source(args, rootfs)
        self.collector = Collector(rootfs, plan, self.backend.apps, self.backend.hardware_info, self.instance.get)
        self.scheduler = Scheduler(self.collector, self._write)
        self.collector.add_extra("neuron_monitor", self.scheduler.self_report)
        self.feed: Feed | None = None
        self.lines: list[bytes] = []

    async def _write(self, line: bytes) -> None:
        report, why = parse_line(line)
        if self.feed is None:
            self.lines.append(line)
        elif report is not None:
            self.feed.report(report)
        else:
            self.feed.problem(f"the collection produced a bad report: {why}")

    async def run(self, feed: Feed, stop: asyncio.Event) -> None:
        """Collect until ``stop`` is set; a failing collection is reported to the feed, not raised."""
        self.feed = feed
        self.instance.start()
        try:
            await self.scheduler.run(stop)
        except Exception as e:  # the view stays up and says why collection stopped
            feed.ended(f"collection stopped: {type(e).__name__}: {e}")

    async def once(self, window: float) -> dict[str, Any] | None:
        """Collect one report over ``window`` seconds (as `neuron-monitor --once`)."""
        self.instance.start()
        await self.scheduler.run_once(window)
        return parse_line(self.lines[-1])[0] if self.lines else None

    def close(self) -> None:
        self.scheduler.close()
        self.instance.close()
        self.backend.close()


class StreamSource:
    """Reads report lines from a binary stream in a daemon thread and hands them to the feed on the loop."""

    def __init__(self, stream: BinaryIO, name: str = "stdin") -> None:
        self.stream = stream
        self.name = name
        self.bad_lines = 0
        self.reports = 0

    def _lines(self) -> Iterator[bytes]:
        """Each line of the stream without its newline; ``OVERSIZE`` for one longer than ``MAX_LINE_BYTES``
        (dropped while it streams in, never held whole)."""
        buffer = LineBuffer(MAX_LINE_BYTES)
        for chunk in chunks(self.stream):  # the shared reader: os.read, no lock held (schema/stream.py)
            for line in buffer.feed(chunk):
                yield OVERSIZE if line is None else line
        for line in buffer.finish():
            yield OVERSIZE if line is None else line

    def handle(self, line: bytes, feed: Feed) -> None:
        """Parse one line and hand the report, or the problem, to the feed."""
        if not line.strip():
            return
        if line == OVERSIZE:
            report, why = None, f"line longer than {MAX_LINE_BYTES} bytes"
        else:
            report, why = parse_line(line)
        if report is not None:
            self.reports += 1
            feed.report(report)
            return
        self.bad_lines += 1
        feed.problem(f"skipped a broken line on {self.name} ({self.bad_lines} so far): {why}")

    def _run(self, loop: asyncio.AbstractEventLoop, feed: Feed) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: we are quitting
            try:
                for line in self._lines():
                    loop.call_soon_threadsafe(self.handle, line, feed)
            except (OSError, ValueError) as e:
                loop.call_soon_threadsafe(feed.ended, f"reading {self.name} failed: {e}")
                return
            loop.call_soon_threadsafe(self._ended, feed)

    def _ended(self, feed: Feed) -> None:
        bad = f", {self.bad_lines} broken line(s) skipped" if self.bad_lines else ""
        feed.ended(f"{self.name} ended after {self.reports} report(s){bad}: no more reports (did the daemon stop?)")

    async def run(self, feed: Feed, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._run, args=(loop, feed), name="report-reader", daemon=True).start()
        await stop.wait()

    def first(self) -> tuple[dict[str, Any] | None, list[str]]:
        """The first valid report of the stream (for --once) and the problems met before it."""
        problems: list[str] = []
        for line in self._lines():
            if not line.strip():
                continue
            report, why = (None, f"line longer than {MAX_LINE_BYTES} bytes") if line == OVERSIZE else parse_line(line)
            if report is not None:
                return report, problems
            problems.append(f"skipped a broken line on {self.name}: {why}")
        problems.append(f"{self.name} ended before a valid report")
        return None, problems


class Replay:
    """A recording in memory with a play head: play at the recorded pace, pause, step, seek by time."""

    def __init__(self, reports: list[dict[str, Any]], problems: list[str] | None = None) -> None:
        self._blobs = [zlib.compress(orjson.dumps(r), 1) for r in reports]
        self.times: list[float] = []
        t = 0.0
        for i, r in enumerate(reports):
            v = read_report(r).report_time
            # never backwards (seeking needs sorted times); AWS's reports carry no time: assume 1 s apart
            t = (max(v, t) if i else v) if v is not None else t + 1.0
            self.times.append(t)
        self.problems = problems or []
        self.index = 0
        self.paused = False
        self.speed = 1.0
        self._elapsed = 0.0  # recorded seconds played since the current report

    @classmethod
    def load(cls, path: str) -> Replay:
        """Read a recording (rotated files included); raise OSError when there is nothing to play."""
        from neuron_monitor.timeline.recording import RecordingReader

        reader = RecordingReader([path])
        reports = [r for r in reader if not validate_report(r)]
        stats = reader.stats
        problems = list(stats.errors)
        if stats.bad_lines:
            problems.append(f"{path}: skipped {stats.bad_lines} broken line(s)")
        if stats.truncated_tails:
            problems.append(f"{path}: {stats.truncated_tails} unfinished record(s) at a file's end were left out")
        if not reports:
            raise OSError(f"{path}: no reports to replay" + (f" ({problems[0]})" if problems else ""))
        return cls(reports, problems)

    def __len__(self) -> int:
        return len(self._blobs)

    def current(self) -> dict[str, Any]:
        report: dict[str, Any] = orjson.loads(zlib.decompress(self._blobs[self.index]))
        return report

    def position(self) -> str:
        state = "paused" if self.paused else "playing" if self.index < len(self) - 1 else "at the end"
        speed = f" x{self.speed:g}" if self.speed != 1.0 else ""
        return f"replay {self.index + 1}/{len(self)} {state}{speed}"

    def _go(self, index: int) -> bool:
        index = max(0, min(len(self) - 1, index))
        moved = index != self.index
        self.index = index
        self._elapsed = 0.0
        return moved

    def step(self, n: int) -> bool:
        """Move ``n`` reports (pauses playback, as stepping is for reading one report)."""
        self.paused = True
        return self._go(self.index + n)

    def seek(self, seconds: float) -> bool:
        """Move to the report nearest ``seconds`` of recorded time away."""
        target = self.times[self.index] + seconds
        forward = seconds >= 0
        return self._go(
            bisect.bisect_left(self.times, target) if forward else bisect.bisect_right(self.times, target) - 1
        )

    def first(self) -> bool:
        return self._go(0)

    def last(self) -> bool:
        return self._go(len(self) - 1)

    def toggle(self) -> None:
        self.paused = not self.paused
        if not self.paused and self.index == len(self) - 1:
            self._go(0)  # play again from the start

    def faster(self, factor: float) -> None:
        self.speed = max(0.125, min(64.0, self.speed * factor))

    def advance(self, wall_seconds: float) -> bool:
        """Let ``wall_seconds`` pass while playing; True when the play head moved to a later report."""
        if self.paused or self.index >= len(self) - 1:
            return False
        self._elapsed += wall_seconds * self.speed
        moved = False
        while self.index < len(self) - 1:
            gap = self.times[self.index + 1] - self.times[self.index]
            if self._elapsed < gap:
                break
            self._elapsed -= gap
            self.index += 1
            moved = True
        return moved
