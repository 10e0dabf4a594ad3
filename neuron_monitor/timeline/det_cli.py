"""``neuron-monitor-det REC...``: find the problems in recordings, one line each, like neuron-det.

Prints ``<type> <NC n|ND n> @ <start> - <end>: key=value ...`` per problem (UTC wall clock; with the date when the
recordings span more than one day; with the instance id when there are several instances), then a summary on
stderr ("no errors detected" when there is nothing). Optionally writes the trace with the problems highlighted.
Exit status: 0 nothing found, 1 problems found, 2 bad usage or unreadable input. ``--rules`` lists the problems
it looks for (the group specs' det rules and its own inferences) with their severity, and exits 0.
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
from neuron_monitor.timeline.detect import DEFAULT_HANG_PERIODS, DEFAULT_MERGE_GAP, INFERRED_RULES, Detector, clock
from neuron_monitor.timeline.selection import det_rules
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name, setup_logging
from neuron_monitor.util.sanitize import sanitize


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        "neuron-monitor-det",
        description="Find execution errors, uncorrected ECC, hangs and vanished runtimes in neuron-monitor recordings.",
    )
    add_filter_arguments(parser)
    parser.add_argument("-o", "--output-file", help="also write a Trace Event Format JSON with the problems marked")
    parser.add_argument(
        "--hang-periods",
        type=int,
        default=DEFAULT_HANG_PERIODS,
        metavar="N",
        help=f"zero-utilization periods in a row that make a hang suspect (default {DEFAULT_HANG_PERIODS})",
    )
    parser.add_argument(
        "--merge-gap",
        type=float,
        default=DEFAULT_MERGE_GAP,
        metavar="SECONDS",
        help="clean time that may separate two error periods of one episode (default: none)",
    )
    parser.add_argument(
        "--rules",
        action="store_true",
        help="list the problems it looks for (type, subject, severity, meaning) and exit",
    )
    add_verbosity(parser, default=2)
    return parser


def rules_text() -> str:
    """One line per problem type: type, subject (runtime or device), severity, what it means."""
    rows = [(r.kind, r.scope, r.severity, r.message) for r in (*det_rules().values(), *INFERRED_RULES)]
    width = max(len(kind) for kind, *_ in rows)
    return "".join(
        f"{kind:<{width}}  {scope:<7}  {severity:<7}  {message}\n" for kind, scope, severity, message in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if argv is None:
        argv = sys.argv[1:]
    if "--rules" in argv:  # no recordings needed
        sys.stdout.write(rules_text())
        return 0
    args = parser.parse_args(argv)
    setup_logging(called_name("neuron-monitor-det"), args.verbose)
    logging.getLogger("neuron_monitor").info(
        "started (version %s): reading %d recording(s)", __version__, len(args.recordings)
    )
    try:
        if args.hang_periods < 1:
            raise UsageError("--hang-periods must be 1 or more")
        if args.merge_gap < 0:
            raise UsageError("--merge-gap must not be negative")
        check_recordings(args.recordings)
        selection = selection_from(args)
        detector = Detector(selection, hang_periods=args.hang_periods, merge_gap=args.merge_gap)
        result = run(args.recordings, selection, detector, args.output_file, args.group_by, highlight=True)
    except UsageError as e:
        print(sanitize(f"{parser.prog}: {e}"), file=sys.stderr)
        return 2
    except OSError as e:
        print(sanitize(f"{parser.prog}: {e.filename or args.output_file}: {e.strerror or e}"), file=sys.stderr)
        return 2
    for err in result.stats.errors:
        print(sanitize(f"{parser.prog}: {err}"), file=sys.stderr)
    if result.stats.in_range == 0:
        kept = f"; {args.output_file} not written" if args.output_file and args.output_file != "-" else ""
        print(sanitize(f"neuron-monitor-det: {nothing_to_show(result.stats)}{kept}"), file=sys.stderr)
        return 2
    problems = result.problems
    days = {clock(t, True)[:10] for p in problems for t in (p.start, p.end)}
    for p in problems:
        print(sanitize(p.line(with_date=len(days) > 1, with_instance=len(detector.instances) > 1)))
    summary = f"{len(problems)} problem(s) detected" if problems else "no errors detected"
    print(sanitize(f"{parser.prog}: {summary}; {result.stats.summary()}"), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
