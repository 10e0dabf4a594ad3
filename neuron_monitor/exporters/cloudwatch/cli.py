"""neuron-monitor-cloudwatch: reads neuron-monitor report lines on stdin and publishes them to Amazon CloudWatch.

    neuron-monitor -c monitor.conf | neuron-monitor-cloudwatch --namespace neuron_monitor --region us-west-2

``--output api`` (default) calls PutMetricData from a sender thread fed through a bounded buffer, so reading stdin
never waits on CloudWatch; ``--output emf`` writes Embedded Metric Format lines to stdout or ``--emf-file`` for the
CloudWatch agent. End of input flushes what is buffered within ``--flush-timeout`` and exits 0; SIGTERM, SIGINT or
SIGHUP does the same within ``STOP_FLUSH_SECONDS`` (or ``--flush-timeout`` when shorter), and the first one arms the
stop watchdog, so the process is gone within 2 s in any phase (a credential chain or a PutMetricData call that
hangs included; what was not sent is counted). A bad option (numbers must be finite and in range) or missing
region/credentials prints one line and exits 2; an EMF destination whose reader went away (EPIPE) exits 1 at once.
A summary line goes to stderr at exit.
No credential reaches a log: every stderr line, botocore's debug output included, passes `redact.CredentialRedactor`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from neuron_monitor import __version__
from neuron_monitor.exporters.cloudwatch.buffer import DatumBuffer
from neuron_monitor.exporters.cloudwatch.client import SetupError, make_client
from neuron_monitor.exporters.cloudwatch.datum import Datum
from neuron_monitor.exporters.cloudwatch.detail import BUDGET, SERIES_DETAILS
from neuron_monitor.exporters.cloudwatch.dimensions import PRESETS, DimensionScheme
from neuron_monitor.exporters.cloudwatch.emf import EmfDestinationGone, EmfWriter
from neuron_monitor.exporters.cloudwatch.limits import DatumFilter, check_namespace, dimension_value_problem
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper
from neuron_monitor.exporters.cloudwatch.publisher import Publisher, RetryPolicy
from neuron_monitor.exporters.cloudwatch.redact import CredentialRedactor
from neuron_monitor.schema.stream import ReportStream
from neuron_monitor.util.cli_common import (
    VERBOSITY_LEVELS,
    ArgumentParser,
    add_verbosity,
    called_name,
    setup_logging,
    warn_if_stdin_is_a_terminal,
)
from neuron_monitor.util.early_signals import release
from neuron_monitor.util.inputfile import InputFileError, open_append
from neuron_monitor.util.stopping import StopDeadline

PROG = "neuron-monitor-cloudwatch"
STOP_FLUSH_SECONDS = 1.0  # on a stop signal: delivery goes on this long at most, then the summary (within 2 s)
log = logging.getLogger("neuron_monitor.exporters.cloudwatch")


class Settings(BaseModel):
    """The validated command line."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    namespace: str
    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    output: Literal["api", "emf"] = "api"
    emf_file: str = "-"
    high_resolution: bool = False
    dimensions: Literal["default", "container-insights"] = "default"
    cluster_name: str = ""
    node_name: str = ""
    per_vcpu: bool = False
    series_detail: Literal["budget", "full"] = "budget"
    buffer_samples: int = Field(100_000, ge=1000, le=100_000_000)
    flush_timeout: float = Field(10.0, ge=0, le=3600)
    retry_base_delay: float = Field(0.5, gt=0, le=3600)
    retry_max_delay: float = Field(20.0, gt=0, le=3600)
    verbose: int = Field(2, ge=0, le=4)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        why = check_namespace(self.namespace)
        if why:
            raise ValueError(f"--namespace: {why}")
        if self.dimensions == "container-insights" and not self.cluster_name.strip():
            raise ValueError("--dimensions container-insights needs --cluster-name (or CLUSTER_NAME)")
        if self.dimensions == "container-insights":
            for flag, value in (("--cluster-name", self.cluster_name), ("--node-name", self.node_name)):
                if why := dimension_value_problem(value):
                    raise ValueError(f"{flag}: {why.replace('dimension value', 'the value')} (a CloudWatch dimension)")
        if self.retry_max_delay < self.retry_base_delay:
            raise ValueError("--retry-max-delay is smaller than --retry-base-delay")
        return self


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(PROG, description="Publish neuron-monitor reports (stdin) to CloudWatch.")
    p.add_argument("--namespace", default="neuron_monitor", help="CloudWatch namespace (default neuron_monitor)")
    p.add_argument("--region", help="AWS region (default: AWS_REGION, then boto3's: AWS_DEFAULT_REGION, profile)")
    p.add_argument("--endpoint-url", help="CloudWatch endpoint, e.g. a VPC endpoint or a local test server")
    p.add_argument("--profile", help="shared config profile for credentials")
    p.add_argument("--output", choices=("api", "emf"), default="api", help="PutMetricData (api) or EMF lines")
    p.add_argument("--emf-file", default="-", help="EMF destination file (default - = stdout; appended)")
    p.add_argument(
        "--high-resolution",
        "--high-resolution-metrics",
        dest="high_resolution",
        action="store_true",
        help="store at 1-second resolution (StorageResolution=1; costs more)",
    )
    p.add_argument("--dimensions", choices=PRESETS, default="default", help="dimension names preset")
    p.add_argument("--cluster-name", default=os.environ.get("CLUSTER_NAME", ""), help="ClusterName dimension")
    p.add_argument("--node-name", default="", help="NodeName dimension (default $NODE_NAME or the host name)")
    p.add_argument("--per-vcpu", action="store_true", help="also send host CPU usage per vCPU")
    p.add_argument(
        "--series-detail",
        choices=SERIES_DETAILS,
        default=BUDGET,
        help="'budget' (default) leaves out the detail the Prometheus budget leaves out (1,470 metrics instead of"
        " 2,319 on a trn2.48xlarge with 16 runtimes); 'full' sends every metric (docs/cloudwatch.md, Cost)",
    )
    p.add_argument("--buffer-samples", type=int, default=100_000, help="samples held while CloudWatch is away")
    p.add_argument("--flush-timeout", type=float, default=10.0, help="seconds to flush at exit (default 10)")
    p.add_argument("--retry-base-delay", type=float, default=0.5, help="first backoff ceiling, seconds")
    p.add_argument("--retry-max-delay", type=float, default=20.0, help="largest backoff ceiling, seconds")
    add_verbosity(p, default=2, short=True)
    return p


def parse_settings(argv: list[str] | None) -> Settings:
    args = build_parser().parse_args(argv)
    values: dict[str, Any] = vars(args)
    if not values["node_name"]:
        values["node_name"] = os.environ.get("NODE_NAME") or socket.gethostname()
    return Settings(**values)


def _reader(
    stream: ReportStream,
    mapper: ReportMapper,
    keep: DatumFilter,
    sink: Callable[[list[Datum]], None],
    done: threading.Event,
    counters: dict[str, int],
    fatal: list[str],
) -> None:
    try:
        for report in stream:
            try:
                datums = keep.keep_valid(mapper.map(report))
                sink(datums)
                counters["datums"] += len(datums)
            except EmfDestinationGone as exc:  # nothing more can be delivered: stop now, exit non-zero
                fatal.append(str(exc))
                return
            except Exception as exc:  # exporters never crash on input
                counters["report_errors"] += 1
                log.warning("skipped a report that could not be converted: %s: %s", type(exc).__name__, exc)
    except Exception as exc:
        log.error("stopped reading stdin: %s: %s", type(exc).__name__, exc)
    finally:
        done.set()


def _open_emf(path: str) -> int:
    """The EMF destination's descriptor: stdout, or ``path`` appended to (kept open for the process lifetime).
    A FIFO without a reader is refused at once (see inputfile.open_append) instead of hanging start-up."""
    if path == "-":
        return sys.stdout.fileno()
    return open_append(path, f"--emf-file {path}")


def _flag_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = [str(x) for x in first["loc"]]
    where = "--" + loc[0].replace("_", "-") if loc and loc[0] in Settings.model_fields else ".".join(loc)
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "finite_number":
        msg = "must be a finite number"
    return f"{where + ': ' if where else ''}{msg}"[:300]


def _setup_logging(prog: str, verbose: int) -> CredentialRedactor:
    """The commands' stderr logging (cli_common), with AWS's SDK loggers (botocore prints request headers at debug)
    sent through the same handler, and every line of both passed through the credential redactor."""
    setup_logging(prog, verbose)
    redactor = CredentialRedactor()
    handler = logging.getLogger("neuron_monitor").handlers[0]
    handler.addFilter(redactor)
    for name in ("botocore", "boto3", "urllib3", "s3transfer"):
        sdk = logging.getLogger(name)
        sdk.handlers[:] = [handler]
        sdk.setLevel(VERBOSITY_LEVELS[verbose])
        sdk.propagate = False
    return redactor


def main(argv: list[str] | None = None) -> int:
    stop = threading.Event()
    received: list[str] = []
    prog = called_name(PROG)
    watchdog = StopDeadline(prog)  # gone within 2 s of the first stop, whatever hangs (start-up included)

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()
        watchdog.arm(received[0])

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # first: a stop while starting is kept
        signal.signal(signum, on_signal)
    release()
    try:
        settings = parse_settings(argv)
    except ValidationError as exc:
        print(f"{prog}: {_flag_error(exc)}", file=sys.stderr)
        return 2
    redactor = _setup_logging(prog, settings.verbose)
    scheme = DimensionScheme(settings.dimensions, settings.cluster_name, settings.node_name)
    mapper = ReportMapper(scheme, MapOptions(settings.high_resolution, settings.per_vcpu, settings.series_detail))
    keep = DatumFilter()

    publisher: Publisher | None = None
    emf: EmfWriter | None = None
    if settings.output == "api":  # the credential chain may wait on the network (the watchdog bounds a stop)
        try:
            client, protocol = make_client(
                settings.region, settings.endpoint_url, settings.profile, on_credentials=redactor.add_secrets
            )
        except SetupError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        buffer = DatumBuffer(settings.buffer_samples)
        publisher = Publisher(
            client,
            settings.namespace,
            buffer,
            RetryPolicy(settings.retry_base_delay, settings.retry_max_delay),
            protocol,
        )
        publisher.start()
        sink: Callable[[list[Datum]], None] = buffer.put
    else:
        try:
            emf = EmfWriter(_open_emf(settings.emf_file), settings.namespace)
        except InputFileError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        sink = emf.write

    where = f"namespace {settings.namespace}" if publisher is not None else f"EMF to {settings.emf_file}"
    log.info("started (version %s, pid %d): reading reports on stdin, %s", __version__, os.getpid(), where)
    warn_if_stdin_is_a_terminal(log)
    stream = ReportStream(sys.stdin.buffer)
    counters = {"datums": 0, "report_errors": 0}
    fatal: list[str] = []
    reader = threading.Thread(
        target=_reader, args=(stream, mapper, keep, sink, stop, counters, fatal), name="stdin-reader", daemon=True
    )
    reader.start()
    while not stop.wait(0.5):
        pass
    if emf is not None and settings.emf_file == "-":  # stdout is written with os.write: nothing left to flush
        with contextlib.suppress(OSError, ValueError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115

    if publisher is not None:
        publisher.finish(min(settings.flush_timeout, STOP_FLUSH_SECONDS) if received else settings.flush_timeout)
    summary: dict[str, Any] = {
        "reason": received[0] if received else "emf_destination_gone" if fatal else "eof",
        "reports": stream.stats.reports,
        "bad_lines": stream.stats.bad_lines,
        "report_errors": counters["report_errors"],
        "datums_mapped": counters["datums"],
        "runtimes_left_out": mapper.runtimes_left_out,
        "invalid_samples": sum(keep.rejected.values()),
    }
    if publisher is not None:
        summary.update(publisher.stats.as_dict())
        summary["dropped_samples"] = publisher.buffer.dropped_samples
    if emf is not None:
        summary.update(emf_events=emf.events, emf_bytes=emf.bytes, emf_dropped_events=emf.dropped_events)
    if fatal:
        print(f"{prog}: error: {fatal[0]}; exiting", file=sys.stderr, flush=True)
    print(f"{prog}: summary {orjson.dumps(summary).decode()}", file=sys.stderr, flush=True)
    return 1 if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
