"""Recordings -> one stream of ``Snapshot``s on one clock, oldest first, for the trace converter and the detector.

Each named recording (a recording file with its rotated siblings, or a JSON-lines capture of neuron-monitor's
stdout) is read lazily; several recordings (a multi-node job) are merged by ``report_time`` with a heap, so memory
stays constant whatever the length. A line that is not a report is counted and skipped. A report without
``report_time`` (AWS's neuron-monitor) gets a stand-in: the previous report's time plus its longest group period
(the first one: its own longest period, so that no period starts before 0). Per instance, a report not newer than
the one before it (a duplicate, or the wall clock stepping back) is counted and dropped, so every consumer sees
each instance's time strictly increasing.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_monitor.schema.stream import validate_report
from neuron_monitor.timeline.extract import Snapshot, parse_snapshot
from neuron_monitor.timeline.recording import ReadStats, RecordingReader


@dataclass
class SourceStats:
    recordings: int = 0
    reports: int = 0
    not_reports: int = 0  # JSON lines that are not neuron-monitor reports
    untimed: int = 0  # reports without report_time (a stand-in time was used)
    out_of_order: int = 0  # dropped: not newer than the instance's previous report
    in_range: int = 0  # reports inside --start/--end (all of them without a range): what a trace shows
    read: list[ReadStats] = field(default_factory=list)

    @property
    def bad_lines(self) -> int:
        return self.not_reports + sum(r.bad_lines for r in self.read)

    @property
    def truncated_tails(self) -> int:
        return sum(r.truncated_tails for r in self.read)

    @property
    def errors(self) -> list[str]:
        return [e for r in self.read for e in r.errors]

    def summary(self) -> str:
        parts = [f"{self.reports} reports from {self.recordings} recording(s)"]
        if self.bad_lines:
            parts.append(f"{self.bad_lines} bad lines skipped")
        if self.untimed:
            parts.append(f"{self.untimed} reports without report_time (stand-in times used)")
        if self.out_of_order:
            parts.append(f"{self.out_of_order} duplicate or out-of-order reports dropped")
        if self.truncated_tails:
            parts.append(f"{self.truncated_tails} unfinished record(s) at a file end ignored")
        return ", ".join(parts)


def _longest_period(report: dict[str, Any]) -> float:
    periods: list[float] = []
    groups: list[Any] = [report.get("system_data")]
    entries = report.get("neuron_runtime_data")
    if isinstance(entries, list):
        groups += [e.get("report") for e in entries if isinstance(e, dict)]
    for g in groups:
        if isinstance(g, dict):
            for obj in g.values():
                if isinstance(obj, dict):
                    p = obj.get("period")
                    if isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p < 86400:
                        periods.append(float(p))
    return max(periods, default=1.0)


def _timed_reports(path: str | os.PathLike[str], stats: SourceStats) -> Iterator[tuple[float, dict[str, Any]]]:
    reader = RecordingReader([path])
    stats.read.append(reader.stats)
    last = 0.0
    step = 0.0
    first = True
    for obj in reader:
        if validate_report(obj):
            stats.not_reports += 1
            continue
        t = obj.get("report_time")
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            last = float(t)
        else:
            stats.untimed += 1
            step_now = _longest_period(obj)
            last = step_now if first else last + step  # the first period starts at 0
        step = _longest_period(obj)
        first = False
        yield last, obj


def iter_snapshots(paths: Iterable[str | os.PathLike[str]], stats: SourceStats) -> Iterator[Snapshot]:
    """Snapshots of every named recording, merged on report_time, each instance's strictly increasing."""
    streams = []
    paths = list(paths)
    names = [Path(p).name for p in paths]
    for n, path in enumerate(paths):
        stats.recordings += 1
        # names a report without an instance id: the file's name, or its path as given when two recordings share a
        # name (node1/rec.gz and node2/rec.gz are two nodes, not one that flaps between their runtimes)
        source = names[n] if names.count(names[n]) == 1 else str(path)

        def keyed(path: str | os.PathLike[str] = path, n: int = n, source: str = source) -> Iterator[Any]:
            for seq, (t, obj) in enumerate(_timed_reports(path, stats)):
                yield (t, n, seq, obj, source)

        streams.append(keyed())
    last_time: dict[str, float] = {}
    for t, _n, _seq, obj, source in heapq.merge(*streams):
        snap = parse_snapshot(obj, t, source)
        if snap.instance in last_time and t <= last_time[snap.instance]:
            stats.out_of_order += 1
            continue
        last_time[snap.instance] = t
        stats.reports += 1
        yield snap
