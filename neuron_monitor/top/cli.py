"""`neuron-monitor-top`: arguments, choice of the report source, `--once` snapshots and exit codes.

Sources: the collection in this process (default; 1 s period unless ``-c``), report lines on stdin (``--stdin``,
or when stdin is a pipe and no collection option is given), or a recording (``--replay FILE``).
Exit codes: 0 after q, SIGTERM, SIGINT or a `--once` snapshot; 1 when `--once` found no report; 2 for bad arguments,
a bad configuration or an unreadable recording (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import stat
import sys
import time
from typing import Any

from neuron_monitor.daemon.cli import add_sim_driver, host_root
from neuron_monitor.daemon.config_values import ConfigError
from neuron_monitor.host.imds import DEFAULT_ENDPOINT
from neuron_monitor.top.controls import ViewState
from neuron_monitor.top.history import CAPACITY
from neuron_monitor.top.layout import MAX_COLUMNS, MAX_ROWS, Frame, plain, render
from neuron_monitor.top.model import screen_from_report
from neuron_monitor.top.sources import CollectSource, Replay, StreamSource, top_plan
from neuron_monitor.util.cli_common import ArgumentParser, bounded_int, positive_int
from neuron_monitor.util.early_signals import interrupt_on_signals
from neuron_monitor.util.sanitize import sanitize

PROG = "neuron-monitor-top"
ONCE_WIDTH = 120  # columns of a --once snapshot written to a pipe or file (COLUMNS overrides)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Live terminal view of Neuron devices, NeuronCores and runtimes.")
    src = p.add_argument_group("report source (default: collect in this process every 1 s)")
    src.add_argument("-c", "--config-file", metavar="FILE", help="neuron-monitor configuration to collect with")
    src.add_argument("--root", default=None, metavar="DIR", help="read every host file below DIR (e.g. /host)")
    src.add_argument("--simulate", metavar="SHAPE", help="collect from a temporary simulated host (e.g. trn2.48xlarge)")
    src.add_argument("--sim-runtimes", type=positive_int, default=None, metavar="N", help="simulated runtimes")
    src.add_argument("--seed", type=int, default=0, help="simulator seed")
    add_sim_driver(src)
    src.add_argument(
        "--sim-steady",
        action="store_true",
        help="a steady simulated load (the live view's simulator otherwise varies: phases, bursts, idle gaps)",
    )
    src.add_argument("--no-imds", action="store_true", help="do not query EC2 instance metadata")
    src.add_argument(
        "--imds-endpoint",
        default=os.environ.get("NEURON_MONITOR_IMDS_ENDPOINT", DEFAULT_ENDPOINT),
        metavar="URL",
        help="EC2 instance metadata endpoint",
    )
    src.add_argument("--imds-timeout", type=float, default=1.0, metavar="S", help=argparse.SUPPRESS)
    src.add_argument("--stdin", action="store_true", help="read report lines from stdin (automatic for a pipe)")
    src.add_argument("--replay", metavar="FILE", help="play a recording (neuron-monitor --record FILE)")
    out = p.add_argument_group("display")
    out.add_argument("--once", action="store_true", help="print one plain-text snapshot and exit")
    out.add_argument(
        "--view", choices=("d", "c", "r", "m"), default="d", help="first view: devices, cores, runtimes or models"
    )
    out.add_argument("--filter", default="", metavar="REGEX", help="show only runtimes whose tag matches REGEX")
    out.add_argument(
        "--width", type=bounded_int(MAX_COLUMNS), default=None, metavar="N", help="--once: columns (default 120)"
    )
    out.add_argument(
        "--height",
        type=bounded_int(MAX_ROWS),
        default=None,
        metavar="N",
        help="--once: lay out the live screen for N rows (with history of a replay's reports) instead of everything",
    )
    out.add_argument("--sort", choices=("util", "memory", "tag", "pid"), default="", help="the runtimes' first order")
    return p


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"{PROG}: {sanitize(message)}\n")
    sys.stderr.flush()
    return code


def _stdin_is_pipe() -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(0).st_mode)
    except OSError:
        return False


def choose_source(args: argparse.Namespace) -> str:
    """ "replay", "stdin" or "collect"."""
    collect_options = args.config_file or args.root or args.simulate
    if args.replay:
        if args.stdin or collect_options:
            raise ConfigError("--replay cannot be combined with --stdin or the collection options")
        return "replay"
    if args.stdin:
        if collect_options:
            raise ConfigError("--stdin cannot be combined with -c, --root or --simulate")
        if os.isatty(0):
            raise ConfigError("--stdin: stdin is a terminal; pipe report lines in: neuron-monitor | neuron-monitor-top")
        return "stdin"
    if _stdin_is_pipe() and not collect_options:
        return "stdin"
    return "collect"


def _keys_fd() -> int | None:
    """The terminal to read keys from: stdin when it is one, else the controlling terminal (stdin is a pipe)."""
    if os.isatty(0):
        return 0
    try:
        return os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None


def _print_once(
    report: dict[str, Any],
    state: ViewState,
    width: int | None,
    problems: list[str],
    height: int | None = None,
    earlier: list[dict[str, Any]] | None = None,
    position: str = "",
) -> None:
    """Print one snapshot: every section in full, or (``height``) the live screen of that size, its history made
    of ``earlier`` reports (a replay's) and this one. ``position``: a replay's place, shown instead of the age (a
    recorded report was not received now: the live view's "received 09:46:10 (0.0s ago)" was untrue for it)."""
    if height is None:
        screen = screen_from_report(report, state.tag_filter)
        frame = Frame(screen=screen, now=time.time(), messages=tuple(problems), filter_text=state.filter_text)
    else:
        from neuron_monitor.top.app import Viewer

        viewer = Viewer("snapshot", state)
        for r in [*(earlier or []), report]:
            viewer.report(r, track=False)
        frame = viewer.frame(time.time(), time.monotonic())
        frame.messages = (*problems, *frame.messages)
    if position:
        frame.now = frame.received = None
        frame.position = position
    if sys.stdout.isatty():
        from neuron_monitor.top.terminal import print_snapshot

        cols = width or os.get_terminal_size(sys.stdout.fileno()).columns
        print_snapshot(render(frame, cols, height))
        return
    cols = width or columns_from_environment() or ONCE_WIDTH
    sys.stdout.write(plain(render(frame, cols, height)))
    sys.stdout.flush()


def columns_from_environment() -> int | None:
    """``COLUMNS`` when it is a whole number from 1 to ``MAX_COLUMNS``; else None, with one line on stderr when it
    is set to something else (as ``ls`` ignores an invalid width: the shell's variable is no configuration of ours)."""
    text = os.environ.get("COLUMNS", "").strip()
    if not text:
        return None
    if text.isdigit() and text.isascii() and 1 <= int(text) <= MAX_COLUMNS:
        return int(text)
    print(
        f"neuron-monitor-top: ignoring COLUMNS={sanitize(text[:40])!r} (not a whole number from 1 to {MAX_COLUMNS})",
        file=sys.stderr,
    )
    return None


def _once(args: argparse.Namespace, kind: str, state: ViewState) -> int:
    problems: list[str] = []
    earlier: list[dict[str, Any]] = []
    position = ""
    report: dict[str, Any] | None
    if kind == "replay":
        replay = Replay.load(args.replay)
        if args.height:  # the history of the last reports (as many as a graph can hold)
            replay.last()
            replay.step(-min(len(replay) - 1, CAPACITY - 1))
            while replay.index < len(replay) - 1:
                earlier.append(replay.current())
                replay.step(1)
        replay.last()
        replay.paused = False  # the steps above paused it; a snapshot shows the last report "at the end"
        report, problems = replay.current(), list(replay.problems)
        position = replay.position()
    elif kind == "stdin":
        report, problems = StreamSource(sys.stdin.buffer).first()
    else:
        plan = top_plan(args.config_file)
        with host_root(args) as root:
            source = CollectSource(args, plan, root)
            try:
                report = asyncio.run(source.once(min(plan.smallest_period(), 1.0)))
            finally:
                source.close()
    if report is None:
        for p in problems:
            sys.stderr.write(f"{PROG}: {sanitize(p)}\n")
        return _fail("no report to show", 1)
    _print_once(report, state, args.width, problems, args.height, earlier, position)
    return 0


def _live(args: argparse.Namespace, kind: str, state: ViewState) -> int:
    from neuron_monitor.top.app import Viewer, run_live

    if not sys.stdout.isatty():
        return _fail("stdout is not a terminal: use --once for a plain-text snapshot", 2)
    keys = _keys_fd()
    if kind == "replay":
        replay = Replay.load(args.replay)
        viewer = Viewer(f"replay of {args.replay}", state, replay)
        return asyncio.run(run_live(viewer, None, keys))
    if kind == "stdin":
        stream = StreamSource(sys.stdin.buffer)
        return asyncio.run(run_live(Viewer("report lines on stdin", state), stream.run, keys))
    plan = top_plan(args.config_file)
    with host_root(args) as root:
        source = CollectSource(args, plan, root)
        try:
            label = f"simulated {args.simulate}" if args.simulate else f"collecting below {root}"
            return asyncio.run(run_live(Viewer(label, state), source.run, keys))
        finally:
            source.close()


def sim_options(args: argparse.Namespace) -> dict[str, object]:
    """The simulator options of ``--simulate``: in the live view unless ``--sim-steady``, the varying load
    (``vary``). The simulator answers the driver's BDF ioctl, so the EFA adapters join their devices and the efa
    column shows (docs/top.md)."""
    if not args.simulate:
        return {}
    options: dict[str, object] = {}
    if not args.once and not args.sim_steady:
        options["vary"] = True
    return options


def main(argv: list[str] | None = None) -> int:
    try:
        # first: SIGTERM, SIGINT or SIGHUP while starting is a clean quit (KeyboardInterrupt)
        interrupt_on_signals("neuron-monitor-top")
    except KeyboardInterrupt:
        return 0
    args = build_parser().parse_args(argv)
    state = ViewState(view=args.view, sort=args.sort)
    if args.filter and not state.set_filter(args.filter):
        return _fail(f"--filter: {state.notice}", 2)
    if args.root is None:
        args.root = ""
    args.sim_options = sim_options(args)
    try:
        kind = choose_source(args)
        args.root = args.root or "/"
        return _once(args, kind, state) if args.once else _live(args, kind, state)
    except ConfigError as e:
        return _fail(str(e), 2)
    except OSError as e:
        return _fail(str(e), 2)
    except KeyboardInterrupt:
        return 0
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
