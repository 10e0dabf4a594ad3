"""neuron-monitor-otlp: reads neuron-monitor report lines on stdin and pushes each report over OTLP/HTTP.

    neuron-monitor -c monitor.conf | neuron-monitor-otlp --endpoint http://127.0.0.1:4318/v1/metrics

SIGTERM/SIGINT are handled before anything else; they end the process within 2 s (what the buffer still holds
after ``STOP_FLUSH_SECONDS`` of delivery is counted as unsent). End of input delivers what is buffered within
``--flush-timeout``. Exit codes: 0 on a signal or end of input, 2 on a bad option, variable or certificate (one
line, no traceback). A summary line (JSON) goes to stderr at exit: reports, points sent, retried, dropped,
rejected. No credential reaches a log: every line passes the credential redactor, which also knows the values of
``--header`` and the headers variables.
"""

# ruff: noqa: E402  (the signal handlers are installed before the other imports, on purpose)
from __future__ import annotations

from neuron_monitor.util.stopping import Stop

# Signals first: installed before the rest of the program is even imported (a quarter of a second of imports),
# so a SIGTERM during start-up ends the process cleanly too (``main`` checks it before starting anything).
STOP = Stop()
STOP.install()

import argparse
import logging
import math
import os
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from neuron_monitor import __version__
from neuron_monitor.exporters.cloudwatch.redact import CredentialRedactor, redact
from neuron_monitor.exporters.otlp.buffer import RequestBuffer
from neuron_monitor.exporters.otlp.jsonwire import JsonEncoder
from neuron_monitor.exporters.otlp.model import ReportConverter
from neuron_monitor.exporters.otlp.naming import NAMERS, NAMINGS, PROMETHEUS
from neuron_monitor.exporters.otlp.pipeline import Encoder, ReportPipeline
from neuron_monitor.exporters.otlp.resource import ResourceBuilder, ResourceError, parse_resource_attributes
from neuron_monitor.exporters.otlp.sender import RetryPolicy, Sender
from neuron_monitor.exporters.otlp.settings import (
    COMPRESSIONS,
    JSON,
    PROTOCOLS,
    SettingsError,
    header_option,
    resolve,
)
from neuron_monitor.exporters.otlp.sigv4 import SigningSetupError, make_signer, region_of_endpoint
from neuron_monitor.exporters.otlp.transport import Endpoint, EndpointError, Signer, Transport
from neuron_monitor.exporters.otlp.wire import ProtobufEncoder
from neuron_monitor.exporters.prometheus.budget import BUDGET, SERIES_DETAILS
from neuron_monitor.exporters.prometheus.labelcap import DEFAULT_MAX_LABEL_LENGTH
from neuron_monitor.exporters.prometheus.series_limit import DEFAULT_MAX_SERIES
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.schema.stream import DEFAULT_MAX_LINE_BYTES, ReportStream
from neuron_monitor.util.cli_common import (
    VERBOSITY_LEVELS,
    ArgumentParser,
    add_verbosity,
    called_name,
    setup_logging,
    warn_if_stdin_is_a_terminal,
)
from neuron_monitor.util.early_signals import release
from neuron_monitor.util.ratelimit import LogRateLimit, held_back

PROG = "neuron-monitor-otlp"
log = logging.getLogger("neuron_monitor.exporters.otlp")
SCOPE_NAME = "neuron-monitor-otlp"
STOP_FLUSH_SECONDS = 1.0  # on SIGTERM/SIGINT: delivery goes on this long, then the process ends (within 2 s)
DEFAULT_BUFFER_SECONDS = 600.0
DEFAULT_BUFFER_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024


def _number(kind: type, low: float, what: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (math.isfinite(value) and value >= low):
            raise argparse.ArgumentTypeError(f"must be a finite number of at least {low:g}, got {text}")
        return value

    return convert


def _header(text: str) -> tuple[str, str]:
    try:
        return header_option(text)
    except SettingsError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--header: ").removeprefix("--header ")) from None


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(PROG, description="Push neuron-monitor reports read from stdin over OTLP/HTTP.")
    p.add_argument(
        "--endpoint",
        help="metrics URL, used as it is; one without a path gets /v1/metrics (default: OTEL_EXPORTER_OTLP_METRICS_"
        "ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/metrics, else http://localhost:4318/v1/metrics)",
    )
    p.add_argument(
        "--protocol", choices=PROTOCOLS, help="default: OTEL_EXPORTER_OTLP_(METRICS_)PROTOCOL, else http/protobuf"
    )
    p.add_argument(
        "--header",
        action="append",
        type=_header,
        default=[],
        metavar="NAME=VALUE",
        help="a request header (repeatable), over OTEL_EXPORTER_OTLP_(METRICS_)HEADERS; values are never logged",
    )
    p.add_argument(
        "--timeout",
        type=_number(float, 0.001, "seconds"),
        help="total seconds per exchange: connect, send, answer (default: OTEL_EXPORTER_OTLP_(METRICS_)TIMEOUT in ms,"
        " else 10)",
    )
    p.add_argument(
        "--compression", choices=COMPRESSIONS, help="default: OTEL_EXPORTER_OTLP_(METRICS_)COMPRESSION, else gzip"
    )
    p.add_argument(
        "--certificate",
        metavar="FILE",
        help="CA bundle that verifies the receiver (default: OTEL_EXPORTER_OTLP_(METRICS_)CERTIFICATE, else the"
        " system's)",
    )
    p.add_argument(
        "--naming",
        choices=NAMINGS,
        default=PROMETHEUS,
        help="'prometheus': the names Prometheus/Mimir turn into neuron-monitor-prometheus's series; 'otel':"
        " OpenTelemetry conventions (docs/otlp.md)",
    )
    p.add_argument(
        "--sigv4",
        nargs="?",
        const="",
        default=None,
        metavar="REGION",
        help="sign requests with AWS SigV4 (service monitoring; botocore's credential chain), e.g. for CloudWatch's"
        " OTLP endpoint; REGION defaults to AWS_REGION / AWS_DEFAULT_REGION",
    )
    p.add_argument(
        "--buffer-seconds",
        type=_number(float, 1.0, "seconds"),
        default=DEFAULT_BUFFER_SECONDS,
        help="reports kept while the receiver is away, in seconds of reports; the oldest are dropped past it",
    )
    p.add_argument(
        "--buffer-bytes",
        type=_number(int, 1024 * 1024, "bytes"),
        default=DEFAULT_BUFFER_BYTES,
        help="and at most this many encoded bytes",
    )
    p.add_argument(
        "--max-request-bytes",
        type=_number(int, 64 * 1024, "bytes"),
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="a report larger than this (before compression) goes in several requests",
    )
    p.add_argument(
        "--flush-timeout",
        type=_number(float, 0.0, "seconds"),
        default=10.0,
        help="seconds to deliver what is buffered at end of input",
    )
    p.add_argument(
        "--retry-base-delay",
        type=_number(float, 0.001, "seconds"),
        default=0.5,
        help="first backoff ceiling, seconds",
    )
    p.add_argument(
        "--retry-max-delay",
        type=_number(float, 0.001, "seconds"),
        default=30.0,
        help="largest backoff ceiling, seconds",
    )
    p.add_argument("--host-name", default="", help="host.name and service.instance.id (default: the host name)")
    p.add_argument(
        "--k8s-node-name", default=os.environ.get("NODE_NAME", ""), help="k8s.node.name (default: $NODE_NAME)"
    )
    p.add_argument(
        "--series-detail",
        choices=SERIES_DETAILS,
        default=BUDGET,
        help="as neuron-monitor-prometheus: 'budget' (default) or 'full'",
    )
    p.add_argument("--core-labels", choices=("device", "aws"), default="device", help="as neuron-monitor-prometheus")
    p.add_argument(
        "--instance-labels-on-info-only",
        action="store_true",
        help="as neuron-monitor-prometheus: the EC2 instance labels on instance_info only",
    )
    p.add_argument(
        "--max-series-per-report",
        type=_number(int, 0, "a whole number"),
        default=DEFAULT_MAX_SERIES,
        metavar="N",
        help="as neuron-monitor-prometheus (0: no limit)",
    )
    p.add_argument("--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, help=argparse.SUPPRESS)
    add_verbosity(p, default=2, short=True)
    return p


def _ssl_context(certificate: str, client_certificate: str, client_key: str) -> ssl.SSLContext:
    """The TLS context; ``SettingsError`` naming the file that cannot be used."""
    try:
        context = ssl.create_default_context(cafile=certificate or None)
    except (OSError, ssl.SSLError) as e:
        raise SettingsError(f"CA certificate {certificate!r}: {_tls_file_problem(e)}") from None
    if client_certificate:
        try:
            context.load_cert_chain(client_certificate, client_key)
        except (OSError, ssl.SSLError) as e:
            raise SettingsError(
                f"client certificate {client_certificate!r} / key {client_key!r}: {_tls_file_problem(e)}"
            ) from None
    return context


def _tls_file_problem(e: OSError) -> str:
    if isinstance(e, ssl.SSLError):
        return f"not a usable PEM file ({e.reason or e})"
    return str(e.strerror or e)


def _setup_logging(prog: str, verbose: int) -> CredentialRedactor:
    """stderr logging (cli_common) with botocore's loggers on the same handler, every line through the redactor."""
    setup_logging(prog, verbose)
    redactor = CredentialRedactor()
    handler = logging.getLogger("neuron_monitor").handlers[0]
    handler.addFilter(redactor)
    for name in ("botocore", "urllib3"):
        sdk = logging.getLogger(name)
        sdk.handlers[:] = [handler]
        sdk.setLevel(VERBOSITY_LEVELS[verbose])
        sdk.propagate = False
    return redactor


def _read(
    stream: ReportStream,
    pipeline: ReportPipeline,
    buffer: RequestBuffer,
    buffer_seconds: float,
    done: Stop,
    counters: dict[str, int],
) -> None:
    bad_log = LogRateLimit(60.0)
    try:
        for report in stream:
            try:
                requests = pipeline.requests(report)
            except MalformedReport as e:
                counters["malformed_reports"] += 1
                n = bad_log.hit()
                if n is not None:
                    log.warning("skipped a malformed report: %s%s", e, held_back(n, "malformed reports"))
                continue
            except Exception as e:  # never crash on input
                counters["malformed_reports"] += 1
                n = bad_log.hit()
                if n is not None:
                    log.warning("skipped a report: %s: %s%s", type(e).__name__, e, held_back(n, "reports"))
                continue
            buffer.set_max_reports(math.ceil(buffer_seconds / max(pipeline.period, 0.1)))
            buffer.put(requests)
    except Exception as e:
        log.error("stopped reading stdin: %s: %s", type(e).__name__, e)
    finally:
        done.event.set()


def main(argv: list[str] | None = None) -> int:
    stop = STOP
    stop.running = False  # (a signal before this point already ended the process)
    stop.install()  # again, in case the module was imported long before
    release()  # the console script (neuron_monitor.launch) held them blocked until now
    prog = called_name(PROG)
    args = build_parser().parse_args(argv)
    if stop.event.is_set():
        return 0
    redactor = _setup_logging(prog, args.verbose)
    try:
        conn = resolve(
            os.environ,
            endpoint=args.endpoint,
            protocol=args.protocol,
            headers=args.header,
            timeout=args.timeout,
            compression=args.compression,
            certificate=args.certificate,
        )
        redactor.add_secrets(*header_secrets(conn.headers.values()))
        redactor.add_header_names(*conn.headers)  # a short value too (botocore's debug CanonicalRequest shows it)
        endpoint = Endpoint.parse(conn.endpoint)
        context = (
            _ssl_context(conn.certificate, conn.client_certificate, conn.client_key)
            if endpoint.scheme == "https"
            else None
        )
        if endpoint.scheme == "http" and (conn.certificate or conn.client_certificate):
            conn.warnings.append(
                f"a TLS certificate is set but the endpoint {endpoint.shown} is plain http: it is not used"
                " and nothing is encrypted (https:// for TLS)"
            )
        extra = parse_resource_attributes(os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
        signer: Signer | None = None
        if args.sigv4 is None and region_of_endpoint(endpoint.host):
            conn.warnings.append(
                f"the endpoint {endpoint.host} is CloudWatch's, which refuses unsigned requests (403): add --sigv4"
            )
        if args.sigv4 is not None:
            signer, region = make_signer(args.sigv4, redactor.add_secrets)
            log.info("signing requests with SigV4 for region %s", region)
            if (named := region_of_endpoint(endpoint.host)) and named != region:
                conn.warnings.append(
                    f"--sigv4 signs for region {region} but the endpoint {endpoint.host} is in {named}: CloudWatch"
                    " refuses every request (403); give the same region to both"
                )
    except (SettingsError, EndpointError, ResourceError, SigningSetupError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if stop.event.is_set():
        return 0
    for warning in conn.warnings:
        log.warning("%s", warning)
    options = ShapeOptions(
        instance_labels_everywhere=not args.instance_labels_on_info_only,
        max_label_length=DEFAULT_MAX_LABEL_LENGTH,
        core_device_label=args.core_labels == "device",
        dra_claim_labels="auto" if args.core_labels == "device" else "off",
        series_detail=args.series_detail,
        max_series=args.max_series_per_report,
    )
    json = conn.protocol == JSON
    encoder: Encoder = JsonEncoder(args.max_request_bytes) if json else ProtobufEncoder(args.max_request_bytes)
    host_name = args.host_name or socket.gethostname()
    stream = ReportStream(sys.stdin.buffer, max_line_bytes=args.max_line_bytes)
    pipeline = ReportPipeline(
        ExporterState(options),
        ReportConverter(NAMERS[args.naming]),
        encoder,
        ResourceBuilder(__version__, host_name, args.k8s_node_name, os.environ.get("OTEL_SERVICE_NAME", ""), extra),
        (SCOPE_NAME, __version__),
        conn.compression == "gzip",
        stream.stats,
    )
    buffer = RequestBuffer(math.ceil(args.buffer_seconds / pipeline.period), args.buffer_bytes)
    headers = {"Content-Type": encoder.content_type, "User-Agent": f"{SCOPE_NAME}/{__version__}"}
    if conn.compression == "gzip":
        headers["Content-Encoding"] = "gzip"
    transport = Transport(endpoint, conn.headers, conn.timeout, context, signer)
    sender = Sender(
        buffer,
        transport,
        headers,
        RetryPolicy(args.retry_base_delay, args.retry_max_delay),
        json,
        scrub=lambda text: redact(text, redactor.secrets),
    )
    stop.running = True  # from here on a signal stops in order (delivery for STOP_FLUSH_SECONDS, then the summary)
    if stop.event.is_set():
        return 0
    sender.start()
    log.info(
        "started (version %s, pid %d): reading reports on stdin, pushing %s to %s",
        __version__,
        os.getpid(),
        conn.protocol,
        endpoint.shown,
    )
    warn_if_stdin_is_a_terminal(log)
    counters = {"malformed_reports": 0}
    eof = Stop()
    reader = threading.Thread(
        target=_read, args=(stream, pipeline, buffer, args.buffer_seconds, eof, counters), name="stdin", daemon=True
    )
    reader.start()
    while not stop.event.is_set() and not eof.event.is_set():
        stop.event.wait(0.5)
    flush = STOP_FLUSH_SECONDS if stop.event.is_set() else args.flush_timeout
    if not stop.event.is_set():
        reader.join(1.0)  # EOF: the reader has put its last report
        if not reader.is_alive() and stream.stats.reports:
            buffer.put(pipeline.closed())  # neuron_exporter_up 0, input_closed 1: what a scrape would show now
    buffer.close()
    if not buffer.wait_empty(flush):
        log.warning("stopping with %d requests (%d points) not delivered", len(buffer), buffer.points())
    unsent = buffer.points()
    sender.stop()
    sender.join(0.3)
    stats = sender.stats
    summary: dict[str, Any] = {
        "reason": stop.signal_name or "eof",
        "reports": stream.stats.reports,
        "bad_lines": stream.stats.bad_lines,
        "malformed_reports": counters["malformed_reports"] + pipeline.stats.malformed_reports,
        "points": pipeline.stats.points,
        "requests_sent": stats.requests_sent,
        "points_sent": stats.points_sent,
        "retries": stats.retries,
        "rejected_points": stats.rejected_points,
        "partial_rejected_points": stats.partial_rejected_points,
        "dropped_reports": buffer.dropped_reports,
        "dropped_points": buffer.dropped_points,
        "buffer_peak_bytes": buffer.peak_bytes,
        "unsent_points": unsent,
        "counter_resets": pipeline.converter.starts.resets,
        "bad_input": {k: int(v) for k, v in pipeline.state.bad_input_counts().items() if v},
    }
    if stats.last_error:
        summary["last_error"] = stats.last_error
    print(f"{prog}: summary {redactor_text(redactor, orjson.dumps(summary).decode())}", file=sys.stderr, flush=True)
    return 0  # a reader still blocked on stdin holds no lock (stream.chunks reads with os.read): exit is clean


def header_secrets(values: Iterable[str]) -> list[str]:
    """What the log redactor hides of the header values: each value whole and each of its words, so that a token
    a receiver echoes without its scheme (``Bearer``, ``Basic``, ``ApiKey``) is hidden too (the redactor ignores
    words shorter than 8 characters)."""
    return [part for value in values for part in (value, *value.split())]


def redactor_text(redactor: CredentialRedactor, text: str) -> str:
    """``text`` as the log handler would show it (credentials redacted)."""
    record = logging.LogRecord("summary", logging.INFO, "", 0, text, None, None)
    redactor.filter(record)
    return str(record.msg)


if __name__ == "__main__":
    sys.exit(main())
