"""``neuron-monitor-trace REC... -o trace.json``: recordings -> Trace Event Format JSON for Perfetto / Chrome.

Reads recordings (``neuron-monitor --record`` files, rotated siblings included, or captured JSON lines) and
writes one trace: a process per instance (several recordings of a multi-node job merged on one clock), counter
tracks per NeuronCore, device, runtime and host, error events with their details. Exit status: 0 written,
1 nothing to convert (no reports, or none between --start and --end), 2 bad usage.
"""

from __future__ import annotations

import argparse
import logging
import sys

from neuron_monitor import __version__
from neuron_monitor.timeline.convert import (
    UsageError,
    add_filter_arguments,
    check_recordings,
    nothing_to_show,
    run,
    selection_from,
)
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name, setup_logging
from neuron_monitor.util.sanitize import sanitize


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        "neuron-monitor-trace",
        description="Convert neuron-monitor recordings to a Trace Event Format JSON file (Perfetto, chrome://tracing).",
    )
    add_filter_arguments(parser)
    parser.add_argument("-o", "--output", default="trace.json", help='trace file to write, "-" for stdout')
    parser.add_argument(
        "--resolution",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="average counters over windows of this length (default: every sample); for long recordings",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    add_verbosity(parser, default=2)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(called_name("neuron-monitor-trace"), args.verbose)
    logging.getLogger("neuron_monitor").info(
        "started (version %s): reading %d recording(s)", __version__, len(args.recordings)
    )
    try:
        if args.resolution < 0:
            raise UsageError("--resolution must not be negative")
        check_recordings(args.recordings)
        selection = selection_from(args)
        result = run(
            args.recordings, selection, Detector(selection), args.output, args.group_by, resolution=args.resolution
        )
    except UsageError as e:
        print(sanitize(f"neuron-monitor-trace: {e}"), file=sys.stderr)
        return 2
    except OSError as e:
        print(sanitize(f"neuron-monitor-trace: {e.filename or args.output}: {e.strerror or e}"), file=sys.stderr)
        return 2
    for err in result.stats.errors:
        print(sanitize(f"neuron-monitor-trace: {err}"), file=sys.stderr)
    if result.stats.in_range == 0:
        kept = "" if args.output == "-" else f"; {args.output} not written"
        print(sanitize(f"neuron-monitor-trace: {nothing_to_show(result.stats)}{kept}"), file=sys.stderr)
        return 1
    if not args.quiet:
        where = "stdout" if args.output == "-" else args.output
        print(
            sanitize(
                f"neuron-monitor-trace: wrote {where}: {result.events} events, {len(result.problems)} error episodes; "
                f"{result.stats.summary()}"
            ),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
