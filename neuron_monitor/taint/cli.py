"""``neuron-monitor-taint``: reads neuron-monitor reports on stdin and keeps one DRA DeviceTaintRule per Neuron
device of this node whose health verdict has stayed ``unhealthy`` past a grace period.

    neuron-monitor -c monitor.conf | neuron-monitor-taint --node-name "$NODE_NAME"

Opt-in and off unless run. The effect is ``None`` (a trial run: visible, harmless) unless ``--effect NoSchedule``
or ``NoExecute``. SIGTERM/SIGINT are held from the console script's first line (neuron_monitor/launch.py) until
the handlers are in place, then end the process within 2 s (an API call in progress is abandoned); SIGHUP too
(nothing to reload). End of input ends it too. Exit codes: 0 on a signal or end of input, 2 on a bad option
(one line, no traceback). A JSON summary line goes to stderr at exit; ``--metrics-file`` keeps the
``neuron_monitor_taint_*`` counters in node-exporter's textfile format. docs/kubernetes-dra.md explains it.
"""

# ruff: noqa: E402  (the signal handlers are installed before the other imports, on purpose)
from __future__ import annotations

from neuron_monitor.util.stopping import Stop, StopDeadline, Stopped

STOP = Stop(interrupt=True, deadline=StopDeadline("neuron-monitor-taint"))
STOP.install()

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any

import orjson

from neuron_monitor import __version__
from neuron_monitor.k8s.dra import DraDirectory
from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError, in_cluster_server
from neuron_monitor.k8s.options import add_dra_arguments
from neuron_monitor.schema.stream import DEFAULT_MAX_LINE_BYTES, ReportStream
from neuron_monitor.taint.decide import Planner, RateLimit
from neuron_monitor.taint.engine import Engine
from neuron_monitor.taint.metrics import render, write_atomically
from neuron_monitor.taint.rules import EFFECTS, label_value_ok
from neuron_monitor.taint.writer import TaintApi
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name, setup_logging
from neuron_monitor.util.early_signals import release

PROG = "neuron-monitor-taint"
log = logging.getLogger("neuron_monitor.taint")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 86400 * 7:
        raise argparse.ArgumentTypeError(f"expected 0..604800 seconds, got {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"expected 1..4096, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        PROG,
        description="Taint (DRA DeviceTaintRule) the Neuron devices of this node whose health verdict stays "
        "unhealthy; reads neuron-monitor reports on stdin.",
    )
    add_dra_arguments(p)
    p.add_argument("--grace", type=_seconds, default=60.0, metavar="S", help="seconds unhealthy before the taint")
    p.add_argument("--hold", type=_seconds, default=300.0, metavar="S", help="seconds healthy before it is removed")
    p.add_argument(
        "--effect",
        choices=EFFECTS,
        default="None",
        help="taint effect: None, the default (a trial run: recorded only), NoSchedule (no new allocation), "
        "NoExecute (evict)",
    )
    p.add_argument("--max-changes-per-minute", type=_count, default=6, metavar="N", help="rule writes a minute")
    p.add_argument(
        "--node-cap", type=_count, default=2, metavar="N", help="devices of this node tainted without confirmation"
    )
    p.add_argument(
        "--confirm-root",
        metavar="DIR",
        default="",
        help="past the node cap, confirm a device by reading its health from the driver's files below DIR "
        "(e.g. /host); without it the cap is a hard limit",
    )
    p.add_argument("--api-deadline", type=_seconds, default=10.0, metavar="S", help="total seconds per API call")
    p.add_argument("--resync", type=_seconds, default=300.0, metavar="S", help="list this node's rules again every S")
    p.add_argument("--metrics-file", default="", metavar="FILE", help="write the counters here (textfile format)")
    p.add_argument("--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, help=argparse.SUPPRESS)
    add_verbosity(p, default=3)
    return p


def _server(args: argparse.Namespace) -> str:
    choice = (args.k8s_api or "auto").strip()
    if choice == "off":
        raise ValueError("--k8s-api off: this command writes DeviceTaintRules and needs the API server")
    if choice == "auto":
        server = in_cluster_server()
        if server is None or not os.path.isfile(args.k8s_api_token_file):
            raise ValueError("--k8s-api auto: not in a pod with a service account token (give --k8s-api URL)")
        return server
    return choice


def _confirmer(root: str, max_age: float = 5.0) -> Any:
    """An independent read of the devices' health from the driver's files below ``root`` (one read of the node
    serves every device asked about within ``max_age`` seconds)."""
    from neuron_monitor.health.cli import from_root

    last: list[tuple[float, set[str]]] = []

    def confirm(index: int) -> bool:
        now = time.monotonic()
        if not last or now - last[0][0] >= max_age:
            health = from_root(root)
            last[:] = [(now, {d.index for d in health.devices if d.state == "unhealthy"})]
        return str(index) in last[0][1]

    return confirm


def _read(stream: ReportStream, slot: list[dict[str, Any]], ready: threading.Event, eof: threading.Event) -> None:
    try:
        for report in stream:
            slot[:] = [report]  # only the latest matters: verdicts are states
            ready.set()
    except Exception as e:
        log.error("stopped reading stdin: %s: %s", type(e).__name__, e)
    finally:
        eof.set()
        ready.set()


def main(argv: list[str] | None = None) -> int:
    stop = STOP
    stop.running = False
    stop.install()  # nothing to reload: SIGHUP stops too
    release()  # the console script (neuron_monitor.launch) held them blocked until now
    prog = called_name(PROG)
    args = build_parser().parse_args(argv)
    node = args.node_name.strip()
    try:
        if not node:
            raise ValueError("--node-name (or NODE_NAME) is required: only this node's devices are tainted")
        if not label_value_ok(node):
            raise ValueError(f"--node-name {node[:80]!r} is not a valid label value (at most 63 characters)")
        api = KubeApi(
            _server(args),
            args.k8s_api_token_file or None,
            args.k8s_api_ca_file or None,
            timeout=min(5.0, max(0.5, args.api_deadline)),
            message_chars=400,
        )
    except (ValueError, KubeApiError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    setup_logging(prog, args.verbose)
    directory = DraDirectory(api, args.dra_driver, node)
    engine = Engine(
        TaintApi(api, node, args.dra_driver, deadline=args.api_deadline),
        directory,
        Planner(args.grace, args.hold, args.node_cap, args.effect),
        RateLimit(args.max_changes_per_minute),
        args.resync,
        _confirmer(args.confirm_root) if args.confirm_root else None,
    )
    stream = ReportStream(sys.stdin.buffer, max_line_bytes=args.max_line_bytes)
    slot: list[dict[str, Any]] = []
    ready, eof = threading.Event(), threading.Event()
    written = -1
    stop.running = True
    try:
        if stop.event.is_set():
            raise Stopped()
        log.info(
            "started (version %s, pid %d): node %s, driver %s, effect %s, grace %g s, hold %g s",
            __version__,
            os.getpid(),
            node,
            args.dra_driver,
            args.effect,
            args.grace,
            args.hold,
        )
        threading.Thread(target=_read, args=(stream, slot, ready, eof), name="stdin", daemon=True).start()
        while not stop.event.is_set():  # also when the Stopped raised by the signal was lost (in a finalizer)
            ready.wait(1.0)
            ready.clear()
            now = time.monotonic()
            if slot:
                report = slot.pop()
                engine.counters.reports += 1
                from neuron_monitor.taint.engine import verdicts

                engine.planner.observe(verdicts(report), now)
            if eof.is_set() and not slot:
                break
            engine.step(now)
            if args.metrics_file and engine.counters.version + engine.counters.reports != written:
                written = engine.counters.version + engine.counters.reports
                _write_metrics(args.metrics_file, engine)
    except Stopped:
        pass
    stop.running = False
    if args.metrics_file:
        _write_metrics(args.metrics_file, engine)
    summary: dict[str, Any] = {
        "reason": stop.signal_name or "eof",
        "reports": engine.counters.reports,
        "bad_lines": stream.stats.bad_lines,
        "rules": sorted(r.name for r in engine.rules.values()),
        "changes": engine.counters.changes,
        "refused": engine.counters.refused,
        "api_errors": engine.counters.api_errors,
        "unmapped_devices": sorted(engine.unmapped),
    }
    if engine.last_error:
        summary["last_error"] = engine.last_error
    print(f"{prog}: summary {orjson.dumps(summary).decode()}", file=sys.stderr, flush=True)
    if not eof.is_set():
        os._exit(0)  # the reader is blocked in a read of stdin: end here (stderr is flushed)
    return 0


def _write_metrics(path: str, engine: Engine) -> None:
    try:
        write_atomically(path, render(engine.counters, len(engine.rules), len(engine.unmapped)))
    except OSError as e:
        log.warning("cannot write %s: %s", path, e)


if __name__ == "__main__":
    sys.exit(main())
