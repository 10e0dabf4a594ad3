"""The image entrypoint, command-line compatible with AWS's ``/opt/bin/entrypoint.sh``: daemon | Prometheus exporter.

AWS's neuron-monitor image is started as (aws-observability/helm-charts,
``charts/amazon-cloudwatch-observability/templates/linux/neuron-monitor-daemonset.yaml``; aws-neuron-sdk
``src/k8/k8s-neuron-monitor-daemonset.yml``)::

    /opt/bin/entrypoint.sh --port 8000 --neuron-monitor-config FILE [--cert-file F --key-file F]

and this module accepts exactly those flags with the same meaning and defaults (port 8000, no configuration
file = the daemon's default of every group every 5 s, HTTPS only when both files are given), so a DaemonSet made
for AWS's image runs ours with only the image changed. It starts ``neuron-monitor`` with its stdout joined to the
stdin of ``neuron-monitor-prometheus`` and supervises both:

- SIGTERM or SIGINT is passed to both as SIGTERM; whatever is still running ``STOP_SECONDS`` later is killed,
  so the container stops within 2 s; exit code 0. SIGHUP is passed to the daemon (it reloads its configuration).
  The handlers are installed first thing; entrypoint.sh starts this module through ``neuron_monitor.launch``,
  which holds these signals blocked until then.
- If either process ends, the other is stopped and the entrypoint exits with the first one's code (1 if that
  was 0), so the kubelet restarts the container instead of leaving half a pipeline running.

Added options and settings (AWS's entrypoint has none of them):

- ``--core-labels aws|device`` (default ``aws``): the exporter's per-core label set. AWS's image is started this
  way only where the CloudWatch agent scrapes it, and the agent needs AWS's label set (see docs/prometheus.md).
- ``--health-groups``: an AWS-only configuration also gets the health groups (the daemon's own default, see
  daemon/added_groups.py). Without it the entrypoint runs the daemon with ``--exact-groups``: AWS's DaemonSets
  pass AWS's configuration, and the CloudWatch agent that scrapes them keeps every ``neuron*`` series as a billed
  metric and attributes per-core series by their labels, so the image collects exactly what AWS's does; the
  daemon's start-up line then names what is left out.
- ``NEURON_MONITOR_ROOT`` (default ``/``): the daemon's ``--root``, e.g. ``/host`` with the host's /proc, /sys and
  /dev mounted there.
- ``NEURON_MONITOR_BIND`` (default ``::``, every IPv6 and IPv4 address; 0.0.0.0 on a kernel without IPv6): the
  exporter's listen address; the Service reaches the pod's IP, IPv6 in an IPv6 EKS cluster.
- ``NEURON_MONITOR_DAEMON_ARGS``, ``NEURON_MONITOR_EXPORTER_ARGS``: more options for each process (shell words).
- When the host's ``/opt/aws`` is mounted at ``/opt-aws`` (as AWS's add-on does for the logical NeuronCore
  config) and ``NEURON_LOGICAL_NC_CONFIG`` is not set, the configured LNC is read from there.

Exit code 2 (one line on stderr) for a bad command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

from neuron_monitor.util.cli_common import add_version
from neuron_monitor.util.early_signals import release

STOP_SECONDS = 1.5
POLL_SECONDS = 0.2
AWS_OPT_MOUNT = "/opt-aws"  # where AWS's add-on mounts the host's /opt/aws
LNC_FILE = "neuron/logical_nc_config"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(2, f"{self.prog}: {message}\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = _ArgumentParser(
        prog="entrypoint.sh",
        description="Run neuron-monitor | neuron-monitor-prometheus with the flags of AWS's image entrypoint.",
    )
    add_version(p)
    p.add_argument("--port", type=int, default=8000, help="exporter port (8000)")
    p.add_argument("--neuron-monitor-config", metavar="FILE", help="neuron-monitor configuration (default: all groups)")
    p.add_argument("--cert-file", metavar="FILE", help="TLS certificate: serve HTTPS (with --key-file)")
    p.add_argument("--key-file", metavar="FILE", help="TLS private key (with --cert-file)")
    p.add_argument(
        "--core-labels",
        choices=("aws", "device"),
        default="aws",
        help="per-core label set of the exporter (aws: exactly AWS's, as the CloudWatch agent needs)",
    )
    p.add_argument(
        "--health-groups",
        action="store_true",
        help="ours: add neuron_device_health, efa_counters and neuron_device_telemetry to an AWS-only configuration"
        " (default: AWS's groups exactly, as the CloudWatch agent that scrapes AWS's DaemonSets expects)",
    )
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error(f"--port {args.port} is not a TCP port")
    if bool(args.cert_file) != bool(args.key_file):
        p.error("--cert-file and --key-file go together")
    return args


def _words(env: dict[str, str], name: str) -> list[str]:
    try:
        return shlex.split(env.get(name, ""))
    except ValueError as e:
        raise SystemExit(f"entrypoint.sh: {name}: {e}") from None


def lnc_from_aws_mount(env: dict[str, str], mount: str = AWS_OPT_MOUNT) -> str | None:
    """The LNC in ``<mount>/neuron/logical_nc_config`` when the environment does not set one, else None."""
    if env.get("NEURON_LOGICAL_NC_CONFIG", "").strip():
        return None
    try:
        with open(os.path.join(mount, LNC_FILE), encoding="utf-8", errors="replace") as f:
            m = re.search(r"NEURON_LOGICAL_NC_CONFIG\s*=\s*(\d+)", f.read(4096))
    except OSError:
        return None
    return m.group(1) if m else None


@dataclass(frozen=True)
class Pipeline:
    daemon: list[str]
    exporter: list[str]
    env: dict[str, str]


def build_pipeline(args: argparse.Namespace, env: dict[str, str], python: str = sys.executable) -> Pipeline:
    """The two command lines (same interpreter, so a PATH set for AWS's image does not matter)."""
    daemon = [python, "-m", "neuron_monitor.daemon.cli", "--root", env.get("NEURON_MONITOR_ROOT") or "/"]
    if args.neuron_monitor_config:
        daemon += ["--config-file", args.neuron_monitor_config]
    if not args.health_groups:  # AWS's DaemonSets' configuration, collected as AWS's daemon does (added_groups.py)
        daemon += ["--exact-groups"]
    daemon += _words(env, "NEURON_MONITOR_DAEMON_ARGS")
    exporter = [python, "-m", "neuron_monitor.exporters.prometheus.cli", "--port", str(args.port)]
    exporter += ["--bind", env.get("NEURON_MONITOR_BIND") or "::", "--core-labels", args.core_labels]
    exporter += ["--exit-on-eof"]
    if args.cert_file:
        exporter += ["--cert-file", args.cert_file, "--key-file", args.key_file]
    exporter += _words(env, "NEURON_MONITOR_EXPORTER_ARGS")
    child_env = dict(env)
    lnc = lnc_from_aws_mount(env)
    if lnc is not None:
        child_env["NEURON_LOGICAL_NC_CONFIG"] = lnc
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    return Pipeline(daemon, exporter, child_env)


class Supervisor:
    """Runs the pipeline's two processes and ends them together."""

    def __init__(self) -> None:
        self.children: tuple[subprocess.Popen[bytes], ...] = ()
        self.daemon: subprocess.Popen[bytes] | None = None
        self.stopping = False

    def start(self, pipeline: Pipeline) -> None:
        """Start the exporter, then the daemon writing into it (signal handlers are installed before this)."""
        read_end, write_end = os.pipe()
        try:
            exporter = subprocess.Popen(pipeline.exporter, stdin=read_end, env=pipeline.env)
            self.children = (exporter,)
            self.daemon = subprocess.Popen(pipeline.daemon, stdout=write_end, env=pipeline.env)
            self.children = (self.daemon, exporter)
        finally:
            os.close(read_end)
            os.close(write_end)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:  # a reload: the daemon's (a no-op before it runs: it reads its file at start)
            if self.daemon is not None and self.daemon.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.daemon.send_signal(signal.SIGHUP)
            return
        self.stopping = True  # the wait loop passes it on within POLL_SECONDS

    def _signal_all(self, signum: int) -> None:
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signum)

    def wait(self) -> int:
        """Wait until a child ends or a signal asks to stop; stop the rest; the exit code."""
        first: subprocess.Popen[bytes] | None = None
        while first is None and not self.stopping:
            first = next((c for c in self.children if c.poll() is not None), None)
            if first is None:
                time.sleep(POLL_SECONDS)
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while any(c.poll() is None for c in self.children) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal_all(signal.SIGKILL)
        for child in self.children:
            child.wait()
        if self.stopping and first is None:
            return 0
        assert first is not None
        name = "neuron-monitor" if first is self.daemon else "neuron-monitor-prometheus"
        code = first.returncode
        sys.stderr.write(f"entrypoint.sh: {name} exited with code {code}; stopping\n")
        return code if code and code > 0 else 1


def main(argv: list[str] | None = None) -> int:
    supervisor = Supervisor()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # first: a stop while starting is kept
        signal.signal(signum, supervisor.on_signal)
    release()
    args = parse_args(argv)
    pipeline = build_pipeline(args, dict(os.environ))
    try:
        supervisor.start(pipeline)
    except OSError as e:
        supervisor.on_signal(signal.SIGTERM, None)
        supervisor.wait()
        sys.stderr.write(f"entrypoint.sh: cannot start the pipeline: {e}\n")
        return 1
    return supervisor.wait()


if __name__ == "__main__":
    sys.exit(main())
