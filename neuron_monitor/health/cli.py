"""``neuron-monitor-health``: is every Neuron device of this node healthy? One look, one exit code.

Reads the host's driver files (``--root``, default ``/``; ``--simulate SHAPE`` for a simulated host) with the
daemon's own ``neuron_device_health`` group, or a running ``neuron-monitor-prometheus`` (``--url``). Prints one line
per device (state and reasons; ``--json`` for JSON; ``--brief`` for the one summary line a node condition shows)
and exits with the node-problem-detector custom-plugin codes: 0 all healthy, 1 any unhealthy, 2 cannot tell
(unknown devices, no device, an exporter that does not answer in ``--timeout`` or serves no health data, bad
arguments). deploy/kubernetes/node-problem-detector.yaml runs it as an NPD custom plugin. An exporter serving TLS
and basic auth is reached with ``--ca-file``, ``--cert-file``/``--key-file`` and ``--user``/``--password-file``
(health/access.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import urllib.parse
from typing import Any

from neuron_monitor.health.access import AccessError, ExporterAccess, exporter_access
from neuron_monitor.health.verdicts import UNKNOWN, NodeHealth, exit_code, from_body, from_exposition, shown, summary
from neuron_monitor.util.cli_common import ArgumentParser
from neuron_monitor.util.deadline import BodyTooLarge, DeadlineExceeded, exchange
from neuron_monitor.util.early_signals import interrupt_on_signals
from neuron_monitor.util.sanitize import url_shown

MAX_BODY = 16 << 20  # a /metrics page of a trn2.48xlarge with 16 runtimes is about 1 MiB


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        "neuron-monitor-health",
        description="Print the health verdict of each Neuron device; exit 0 healthy, 1 unhealthy, 2 unknown.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--root", default="/", metavar="DIR", help="read the host's files below this directory")
    src.add_argument("--simulate", metavar="SHAPE", help="check a temporary simulated host (e.g. trn2.48xlarge)")
    src.add_argument(
        "--url", metavar="URL", help="ask a running neuron-monitor-prometheus (e.g. http://127.0.0.1:8000)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds allowed for the whole --url exchange (default 3)",
    )
    tls = p.add_argument_group("an exporter serving TLS and basic auth (--url https://...; as a scrape job's)")
    tls.add_argument("--ca-file", metavar="FILE", help="trust the exporter's certificate if this CA (PEM) signed it")
    tls.add_argument("--cert-file", metavar="FILE", help="client certificate (PEM), with --key-file")
    tls.add_argument("--key-file", metavar="FILE", help="the client certificate's key (PEM)")
    tls.add_argument("--user", metavar="NAME", help="basic auth user name, with --password-file")
    tls.add_argument("--password-file", metavar="FILE", help="file holding the basic auth password (one line)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--brief", action="store_true", help="print only the summary line (at most 80 characters)")
    return p


def _metrics_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--url must be an http(s) URL, got {shown(url_shown(url), 60)!r}")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _connection(
    parts: urllib.parse.SplitResult, timeout: float, tls: ssl.SSLContext | None
) -> http.client.HTTPConnection:
    host, port = parts.hostname or "", parts.port
    if parts.scheme == "https":
        context = tls if tls is not None else ssl.create_default_context()
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def from_url(url: str, timeout: float, access: ExporterAccess | None = None) -> NodeHealth:
    """The node's health as a running exporter serves it (state unknown, with the reason, when it cannot);
    ``access``: the TLS context and basic auth of an exporter that asks for them."""
    access = access or ExporterAccess()
    try:
        target = _metrics_url(url)
    except ValueError as e:
        return NodeHealth("unknown", problem=str(e))
    parts = urllib.parse.urlsplit(target)
    target = url_shown(target)  # as messages show it (a password in the URL is never sent, nor shown)
    headers = {"Accept": "text/plain;version=0.0.4", "User-Agent": "neuron-monitor-health"}
    if access.authorization is not None:
        headers["Authorization"] = access.authorization
    try:  # the whole exchange within --timeout (util.deadline), however slowly the server answers
        conn = _connection(parts, timeout, access.tls)
        answer = exchange(
            conn, "GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers, timeout, MAX_BODY
        )
    except BodyTooLarge:
        return NodeHealth("unknown", problem=f"{shown(target, 60)}: /metrics over {MAX_BODY} bytes")
    except DeadlineExceeded as e:
        return NodeHealth("unknown", problem=f"{shown(target, 60)}: {e}")
    except (OSError, ValueError, http.client.HTTPException) as e:
        return NodeHealth("unknown", problem=f"{shown(target, 60)}: {shown(str(e) or type(e).__name__, 60)}")
    if answer.status == 401:
        hint = "wrong --user/--password-file" if access.authorization else "it asks for --user/--password-file"
        return NodeHealth("unknown", problem=f"{shown(target, 60)} answered 401 ({hint})")
    if answer.status != 200:
        return NodeHealth("unknown", problem=f"{shown(target, 60)} answered {answer.status}")
    raw = answer.body
    try:
        return from_exposition(raw.decode("utf-8", "replace"))
    except (ValueError, TypeError) as e:
        return NodeHealth("unknown", problem=f"{shown(target, 60)}: unreadable /metrics ({shown(str(e), 60)})")


def from_root(root: str) -> NodeHealth:
    """The node's health from the driver's files below ``root`` (one collection of neuron_device_health)."""
    from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
    from neuron_monitor.host.rootfs import RootFS

    try:
        fs = RootFS(root)
    except OSError as e:
        return NodeHealth("unknown", problem=f"--root {shown(root, 60)}: {e.strerror or e}")
    group = NeuronDeviceHealth(fs)
    try:
        return from_body(group.collect())
    finally:
        group.close()
        fs.close()


def from_simulation(shape: str) -> NodeHealth:
    from neuron_monitor.sim.temporary import TemporarySimulator

    with TemporarySimulator(shape, runtimes=1) as sim:
        return from_root(str(sim.root))


def render(health: NodeHealth) -> str:
    """The summary line (not cut at a node condition's 80 characters: --brief is for that) and one per device."""
    lines = [summary(health, 300)]
    for d in health.devices:
        why = ", ".join(d.reasons)
        lines.append(
            f"neuron_device {shown(d.index, 8)}: {shown(d.state, 12)}" + (f" ({shown(why, 200)})" if why else "")
        )
    return "\n".join(lines)


def as_json(health: NodeHealth) -> dict[str, Any]:
    return {
        "state": health.state,
        "problem": health.problem,
        "devices": [
            {"neuron_device_index": d.index, "state": d.state, "since": d.since, "reasons": d.reasons}
            for d in health.devices
        ],
    }


def main(argv: list[str] | None = None) -> int:
    try:
        # first: SIGTERM, SIGINT or SIGHUP at any point is one line and "unknown" (also from the watchdog)
        interrupt_on_signals("neuron-monitor-health", UNKNOWN)
        return _main(argv)
    except KeyboardInterrupt as e:
        sys.stderr.write(f"neuron-monitor-health: stopped by {e.args[0] if e.args else 'SIGINT'} before a verdict\n")
        return UNKNOWN


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.timeout <= 60:
        sys.stderr.write("neuron-monitor-health: --timeout must be in (0, 60] seconds\n")
        return UNKNOWN
    client_options = (args.ca_file, args.cert_file, args.key_file, args.user, args.password_file)
    if args.url:
        try:
            scheme = urllib.parse.urlsplit(args.url).scheme
            access = exporter_access(scheme, *client_options)
        except (AccessError, ValueError) as e:
            sys.stderr.write(f"neuron-monitor-health: {shown(str(e), 300)}\n")
            return UNKNOWN
        health = from_url(args.url, args.timeout, access)
    elif any(v is not None for v in client_options):
        sys.stderr.write(
            "neuron-monitor-health: --ca-file, --cert-file, --key-file, --user, --password-file go with --url\n"
        )
        return UNKNOWN
    elif args.simulate:
        try:
            health = from_simulation(args.simulate)
        except (KeyError, ValueError) as e:
            sys.stderr.write(f"neuron-monitor-health: --simulate: {shown(str(e.args[0] if e.args else e), 200)}\n")
            return UNKNOWN
    else:
        health = from_root(args.root)
    if args.json:
        text = json.dumps(as_json(health), separators=(",", ":"))
    elif args.brief:
        text = summary(health)
    else:
        text = render(health)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return exit_code(health)


if __name__ == "__main__":
    sys.exit(main())
