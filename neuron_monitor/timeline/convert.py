"""One pass over recordings: feed every snapshot to the detector and (optionally) the trace converter.

Shared by ``neuron-monitor-trace`` and ``neuron-monitor-det``. The trace is written to a temporary file beside
the output and renamed into place at the end, so a failed run never leaves a half-written trace behind.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from neuron_monitor.timeline.detect import Detector, Problem
from neuron_monitor.timeline.recording import recording_files
from neuron_monitor.timeline.selection import Selection
from neuron_monitor.timeline.source import SourceStats, iter_snapshots
from neuron_monitor.timeline.trace import GROUP_BY, TraceConverter
from neuron_monitor.timeline.trace_writer import TraceWriter
from neuron_monitor.util.inputfile import kind_of

WRITE_BUFFER = 1024 * 1024


class UsageError(Exception):
    """Bad arguments: the message is printed and the command exits with 2."""


@dataclass
class Result:
    problems: list[Problem]
    stats: SourceStats
    events: int = 0  # trace events written
    unchanged: int = 0  # counter samples left out because the value did not change
    written: bool = True  # False: no report was read, so the output file was left as it was (or not made)


def nothing_to_show(stats: SourceStats) -> str:
    """Why a run has nothing to show: no report read, or none inside --start/--end."""
    if stats.reports == 0:
        return "no reports found in the recordings"
    return f"no report between --start and --end ({stats.reports} read)"


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recordings", nargs="+", metavar="REC", help="recording files (rotated siblings included)")
    parser.add_argument(
        "--group-by", choices=GROUP_BY, default="instance", help="one trace process per ... (default: instance)"
    )
    parser.add_argument("--filter-neuron-core", metavar="LIST", help='NeuronCores to keep, e.g. "0,2-5"')
    parser.add_argument(
        "--filter-event-type",
        metavar="LIST",
        help='event types to keep, e.g. "errors,latency" or "counters,^flops" (see docs/timeline.md)',
    )
    parser.add_argument("--filter-instance-id", metavar="LIST", help='instances to keep, e.g. "i-abc,i-def"')
    parser.add_argument("--ignore-host", action="store_true", help="leave out host and runtime vCPU/memory tracks")
    parser.add_argument("--start", metavar="TIME", help="leave out reports before TIME (epoch s or ISO, UTC)")
    parser.add_argument("--end", metavar="TIME", help="leave out reports after TIME (epoch s or ISO, UTC)")


def selection_from(args: argparse.Namespace) -> Selection:
    try:
        return Selection.from_options(
            args.filter_neuron_core,
            args.filter_event_type,
            args.filter_instance_id,
            args.ignore_host,
            args.start,
            args.end,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def check_recordings(paths: Sequence[str]) -> None:
    for p in paths:
        files = recording_files(p)
        if not any(f.exists() for f in files):
            raise UsageError(f"no such recording: {p}")
        for f in files:
            if f.is_dir():
                raise UsageError(f"{f} is a directory, not a recording")


def check_output(output: str) -> None:
    """OSError unless ``output`` is absent, a regular file or a link (the link itself is replaced): the trace is
    written beside it and renamed over it, so `-o /dev/null` as root replaced /dev/null with a regular file."""
    try:
        mode = os.lstat(output).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(errno.EINVAL, f"is {kind_of(mode)}, not a regular file (left as it is; -o - writes to stdout)")


def run(
    paths: Sequence[str],
    selection: Selection,
    detector: Detector,
    output: str | None = None,
    group_by: str = "instance",
    highlight: bool = False,
    resolution: float = 0.0,
) -> Result:
    """Read every recording once; write the trace to ``output`` ("-" for stdout) when given. The trace is renamed
    over ``output``: a FIFO, device node or directory there is refused first (OSError), never replaced."""
    stats = SourceStats()
    if output is not None and output != "-":
        check_output(output)
    if output is None:
        for snap in iter_snapshots(paths, stats):
            if selection.wants_time(snap.time):
                stats.in_range += 1
                detector.feed(snap)
        return Result(detector.finish(), stats)
    if output == "-":
        return _convert(paths, selection, detector, sys.stdout.buffer, group_by, highlight, resolution, stats)
    target = Path(output)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb", buffering=WRITE_BUFFER) as f:
            result = _convert(paths, selection, detector, f, group_by, highlight, resolution, stats)
        if stats.in_range == 0:  # a run with nothing to show failed: an earlier trace of that name stays as it was
            Path(tmp).unlink(missing_ok=True)
            result.written = False
            return result
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return result


def _convert(
    paths: Sequence[str],
    selection: Selection,
    detector: Detector,
    out: IO[bytes],
    group_by: str,
    highlight: bool,
    resolution: float,
    stats: SourceStats,
) -> Result:
    writer = TraceWriter(out, resolution)
    converter = TraceConverter(writer, selection, group_by)
    for snap in iter_snapshots(paths, stats):
        if not selection.wants_time(snap.time):
            continue
        stats.in_range += 1
        detector.feed(snap)
        converter.feed(snap)
    problems = detector.finish()
    converter.finish(problems, highlight=highlight)
    other = converter.other_data()
    other["reports"] = stats.reports
    writer.close(other)
    return Result(problems, stats, writer.events, writer.unchanged)
