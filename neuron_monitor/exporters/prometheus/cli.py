"""neuron-monitor-prometheus: read neuron-monitor reports on stdin, serve them on /metrics.

    neuron-monitor -c monitor.conf | neuron-monitor-prometheus --port 8000

Accepts AWS's flags (``-p/--port``, ``--key-file``/``--cert-file``, ``--enable-k8s-info``) so existing pipelines
work unchanged. Exit codes: 0 on SIGINT/SIGTERM/SIGHUP, 2 on a bad command line or web config, 1 when the port cannot
be bound or (with ``--exit-on-eof``) when stdin closes. Without ``--exit-on-eof`` the exporter keeps running
after stdin closes: ``/healthz`` answers 503 and ``neuron_exporter_up`` is 0 so a supervisor or probe can act,
and the Neuron series stop once the last report is stale. A stop signal ends the process within
``STOP_DEADLINE_SECONDS`` (util/stopping.py): a watchdog ends it if the orderly stop has not.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import math
import signal
import sys
from collections.abc import Callable
from typing import Any

from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.app import ExporterApp
from neuron_monitor.exporters.prometheus.auth import BasicAuth
from neuron_monitor.exporters.prometheus.budget import BUDGET, SERIES_DETAILS
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.ingest import StdinIngest, read_every_for
from neuron_monitor.exporters.prometheus.labelcap import DEFAULT_MAX_LABEL_LENGTH
from neuron_monitor.exporters.prometheus.labels import DRA_LABEL_MODES
from neuron_monitor.exporters.prometheus.process_metrics import ProcessMetrics
from neuron_monitor.exporters.prometheus.series_limit import DEFAULT_MAX_SERIES
from neuron_monitor.exporters.prometheus.server import HTTPFront, ServerLimits
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import DEFAULT_STALE_FLOOR, DEFAULT_STALE_PERIODS, ExporterState
from neuron_monitor.exporters.prometheus.tls import ReloadingTLS
from neuron_monitor.exporters.prometheus.webconfig import (
    TLSServerConfig,
    WebConfig,
    WebConfigError,
    load_web_config,
)
from neuron_monitor.schema.stream import DEFAULT_MAX_LINE_BYTES, ReportStream
from neuron_monitor.util import early_signals
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name, setup_logging
from neuron_monitor.util.early_signals import SIGNALS
from neuron_monitor.util.stopping import StopDeadline

log = logging.getLogger("neuron_monitor.exporters.prometheus")
PROG = "neuron-monitor-prometheus"


def _positive_seconds(text: str) -> float:
    """A finite, positive number (``nan``, ``inf`` and 0 are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def _zero_or_at_least(minimum: int, zero_means: str) -> Callable[[str], int]:
    """An argparse type: a whole number that is 0 (``zero_means``) or at least ``minimum``."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value != 0 and value < minimum:
            raise argparse.ArgumentTypeError(f"must be 0 ({zero_means}) or at least {minimum}, got {text}")
        return value

    return convert


_label_length = _zero_or_at_least(16, "no cap")
_series_limit = _zero_or_at_least(1000, "no limit")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(
        PROG,
        description="Serve neuron-monitor reports read from stdin as Prometheus metrics.",
    )
    p.add_argument("-p", "--port", type=int, default=8000, help="HTTP port on which to run the server (8000)")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address to listen on (127.0.0.1: this host only; 0.0.0.0 to serve the network, '::' for IPv6 and IPv4)",
    )
    p.add_argument(
        "--web-config",
        "--web.config.file",
        dest="web_config",
        metavar="FILE",
        help="exporter-toolkit web config (YAML): TLS certificate and key, basic auth users with bcrypt hashes",
    )
    p.add_argument("--key-file", help="TLS private key (AWS-compatible; prefer --web-config)")
    p.add_argument("--cert-file", help="TLS certificate (AWS-compatible; prefer --web-config)")
    p.add_argument(
        "--enable-k8s-info",
        action="store_true",
        help="always add pod_name/namespace/container_name labels (they are added anyway when reports carry"
        " neuron_k8s_info)",
    )
    p.add_argument(
        "--instance-labels-on-info-only",
        action="store_true",
        help="put the EC2 instance labels on instance_info only, not on every series (target-label practice);"
        " default: on every series, as AWS's exporter does",
    )
    p.add_argument(
        "--core-labels",
        choices=("device", "aws"),
        default="device",
        help="labels of per-core series: 'device' (default) adds neuron_device_index to AWS's set; 'aws' gives"
        " exactly AWS's set, as the CloudWatch agent needs (the device stays on neuroncore_info)",
    )
    p.add_argument(
        "--dra-claim-labels",
        choices=DRA_LABEL_MODES,
        default=None,
        help="dra_claim_name/dra_claim_namespace on runtime and core series: 'auto' (default; only when the report"
        " has cores held through a DRA claim), 'on', 'off'; with --core-labels aws the default is 'off'",
    )
    p.add_argument(
        "--series-detail",
        choices=SERIES_DETAILS,
        default=BUDGET,
        help="'budget' (default) leaves out detail no dashboard panel or alert reads (about 1,500 series on a"
        " trn2.48xlarge with 16 runtimes, AWS's families whole); 'full' serves every series (docs/fleet.md)",
    )
    p.add_argument(
        "--stale-periods",
        type=_positive_seconds,
        default=DEFAULT_STALE_PERIODS,
        help="report intervals (from the reports' report_time/period) without a report after which /healthz fails"
        " and Neuron series are withdrawn (3); never less than 2 x the longest group period nor --stale-floor",
    )
    p.add_argument(
        "--stale-floor",
        type=_positive_seconds,
        default=DEFAULT_STALE_FLOOR,
        metavar="SECONDS",
        help="the staleness window is never shorter than this (10)",
    )
    p.add_argument(
        "--max-label-length",
        type=_label_length,
        default=DEFAULT_MAX_LABEL_LENGTH,
        metavar="CHARS",
        help=f"cut longer label values to this length, ending in a marker ({DEFAULT_MAX_LABEL_LENGTH}; 0: no cap)",
    )
    p.add_argument(
        "--max-series-per-report",
        type=_series_limit,
        default=DEFAULT_MAX_SERIES,
        metavar="N",
        help=f"serve at most N series of one report, leaving the rest out in report order and counting the report"
        f' in neuron_exporter_bad_input_total{{reason="series_limit"}} ({DEFAULT_MAX_SERIES}; 0: no limit)',
    )
    p.add_argument(
        "--created-series",
        action="store_true",
        help="add <name>_created samples to execution_errors, execution_status and hardware_ecc_events",
    )
    p.add_argument(
        "--write-timeout",
        type=_positive_seconds,
        default=ServerLimits.write_timeout,
        metavar="SECONDS",
        help="close a connection that has not read its whole response this long after it started, and count it "
        'in neuron_exporter_connections_closed_total{reason="write_timeout"} (%(default)g)',
    )
    p.add_argument("--exit-on-eof", action="store_true", help="exit with code 1 when stdin closes")
    p.add_argument("--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, help=argparse.SUPPRESS)
    add_verbosity(p, default=3)
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error(f"--port {args.port} is not a TCP port")
    if bool(args.key_file) != bool(args.cert_file):
        p.error("--key-file and --cert-file go together")
    if args.web_config and args.key_file:
        p.error("use either --web-config or --key-file/--cert-file, not both")
    return args


def web_config_from_args(args: argparse.Namespace) -> WebConfig | None:
    if args.web_config:
        config = load_web_config(args.web_config)
        if config.tls_server_config is None:
            raise WebConfigError(
                f"web config {args.web_config} has no tls_server_config: plain HTTP is served only without --web-config"
            )
        return config
    if args.key_file:
        return WebConfig(tls_server_config=TLSServerConfig(cert_file=args.cert_file, key_file=args.key_file))
    return None


def runtime_collectors() -> list[Collector]:
    """process_*, python_info and python_gc_*, as AWS's exporter serves them (client_python's defaults), read
    cheaply per scrape (``process_metrics``)."""
    return [ProcessMetrics()]


def quiet_gc() -> None:
    """Keep the cyclic garbage collector off the report path. A decoded report is a tree (no cycles: reference
    counting frees it), but its ten thousand objects per trn2.48xlarge report triggered young collections and,
    as they were promoted, full collections over every long-lived object: 0.19 ms per report of 1.3 ms in a
    replay (docs/prometheus.md). The objects alive after start-up are frozen out of collections, and a young
    collection waits for 10,000 net allocations (leaked cycles, if any, still get collected)."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)


def main(argv: list[str] | None = None) -> int:
    try:
        # first: a stop while starting (until the loop serves) is a clean stop too: main() returns 0 and says
        # which signal stopped it; the signal is also kept (early_signals.STOPPED), for a SystemExit lost in a
        # finalizer
        early_signals.stop_on_signals(SystemExit)  # and a signal held since the start is delivered here
        return _main(argv)
    except SystemExit as e:  # a stop signal before serving (a bad command line exits 2 as before)
        if isinstance(e.code, str) and e.code.startswith("SIG"):
            sys.stderr.write(f"{called_name(PROG)}: stopped by {e.code} while starting\n")
            return 0
        raise


def _main(argv: list[str] | None) -> int:
    args = parse_args(argv)
    prog = called_name(PROG)
    setup_logging(prog, args.verbose)
    try:
        web = web_config_from_args(args)
        tls = ReloadingTLS(web.tls_server_config) if web and web.tls_server_config else None
    except WebConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    options = ShapeOptions(
        instance_labels_everywhere=not args.instance_labels_on_info_only,
        always_k8s_labels=args.enable_k8s_info,
        max_label_length=args.max_label_length,
        core_device_label=args.core_labels == "device",
        dra_claim_labels=args.dra_claim_labels or ("auto" if args.core_labels == "device" else "off"),
        series_detail=args.series_detail,
        max_series=args.max_series_per_report,
    )
    state = ExporterState(
        options, stale_periods=args.stale_periods, stale_floor=args.stale_floor, created_series=args.created_series
    )
    stream = ReportStream(sys.stdin.buffer, max_line_bytes=args.max_line_bytes)
    app = ExporterApp(
        ExporterCollector(state, stream.stats),
        runtime_collectors(),
        BasicAuth(web.basic_auth_users) if web else None,
    )
    try:
        server = HTTPFront(
            (args.bind, args.port),
            app,
            tls,
            limits=ServerLimits(write_timeout=args.write_timeout),
            server_name=f"neuron-monitor-prometheus/{__version__}",
            extra_headers=dict(web.http_server_config.headers) if web else None,
        )
    except OSError as e:
        where = f"{args.bind}:{args.port}"
        print(f"{prog}: cannot listen on {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    app.front = app.exporter.front = server  # the bcrypt pool; neuron_exporter_connections_closed
    stopped_by_eof = False

    def at_eof() -> None:
        nonlocal stopped_by_eof
        state.close_input()
        log.warning("stdin closed after %d reports; /healthz now fails", stream.stats.reports)
        if args.exit_on_eof:
            stopped_by_eof = True
            server.stop_running()

    publisher = app.exporter.publisher  # scrapes serve its last complete rendering (publish.py)

    def applied(report: dict[str, Any], line: bytes | None) -> None:
        state.apply(report, line)
        if ingest.polled:
            publisher.report_applied(more=ingest.lines_waiting)  # a read's reports: one publication, the newest
        elif (loop := publisher.loop) is not None:  # the thread that reads a regular file
            loop.call_soon_threadsafe(publisher.report_applied)

    def input_ended() -> None:
        publisher.hurry()  # the last report is published at once, not when a scrape is due
        at_eof()

    ingest = StdinIngest(sys.stdin.buffer, stream, applied, input_ended, read_every_for(args.stale_floor))
    ingest.hold = publisher.hold  # the loop is left idle when a scrape is due (publish.py)
    ingest.paused = publisher.reads_paused  # a publication due before the next read starts right after this one

    deadline = StopDeadline(prog)
    stopped_by = ""

    def stop_serving(name: str) -> None:
        nonlocal stopped_by
        stopped_by = stopped_by or name
        deadline.arm(name)  # the process is gone within STOP_DEADLINE_SECONDS, orderly or not
        server.stop_running()

    def ready(loop: asyncio.AbstractEventLoop) -> None:
        # While serving, a stop signal only wakes the loop, which stops in its own turn. A handler that raised
        # SystemExit wherever the main thread was would lose the stop when that was a finalizer or an OpenSSL
        # callback (Python drops exceptions there; tests/hostile/test_exporter_signals.py).
        for signum in SIGNALS:
            loop.add_signal_handler(signum, stop_serving, signal.Signals(signum).name)
        if early_signals.STOPPED:  # a stop whose SystemExit was lost while starting
            loop.call_soon(stop_serving, early_signals.STOPPED[0])
        quiet_gc()
        scheme = "HTTPS" if tls else "HTTP"
        log.info("Running %s prometheus server at %s port %d", scheme, args.bind, server.server_address[1])
        publisher.attach(loop)
        ingest.attach(loop)
        if ingest.polled:
            server.after_response = ingest.read_early  # small reads ride on the scrapes' turns (ingest.py)

    try:
        server.run(ready)  # HTTP and stdin on this thread's event loop (see ingest.py)
    except SystemExit as e:  # SIGINT, SIGTERM or SIGHUP before serving: a clean stop
        stopped_by = str(e.code)
    finally:
        ingest.restore()
    if stopped_by:
        log.info("stopped by %s", stopped_by)
        return 0
    return 1 if stopped_by_eof else 0


if __name__ == "__main__":
    sys.exit(main())
