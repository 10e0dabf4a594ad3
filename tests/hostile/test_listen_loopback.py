"""Services bind to loopback unless told: the Prometheus exporter (the only command of ours that listens) serves
127.0.0.1 when started without ``--bind``, and the systemd unit's shipped arguments do not change that.

Before (found 2026-11-29): ``--bind`` defaulted to 0.0.0.0 as AWS's exporter does, and the shipped
``prometheus.env`` set only ``--port=8000``, so a unit installed with ``neuron-monitor-install --systemd`` served
``/metrics`` (models, pods) on every interface without authentication. The listening socket is read from the
kernel's own table (``/proc/net/tcp``, ``tcp6``), not from the exporter's log line.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

from neuron_monitor.exporters.prometheus.cli import parse_args
from tests.exporters.prometheus.prom_process import exporter_cmd

REPO = Path(__file__).resolve().parents[2]
LISTEN = "0A"  # the TCP state column of a listening socket in /proc/net/tcp


def listening_addresses(port: int) -> list[str]:
    """The local addresses (hex, as the kernel writes them) of the TCP sockets listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue  # no IPv6 in this kernel
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == LISTEN and int(hex_port, 16) == port:
                found.append(address)
    return found


def announced_port(proc: subprocess.Popen[str]) -> int:
    """The port the exporter says it serves on (its "server at ... port N" line on stderr, within 60 s)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "the exporter exited before it served"
        if m := re.search(r"server at \S+ port (\d+)", line):
            return int(m.group(1))
    raise AssertionError("the exporter did not say its port within 60 s")


def test_the_exporter_started_without_bind_listens_on_loopback_only() -> None:
    proc = subprocess.Popen(exporter_cmd("--port", "0"), stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        addresses = listening_addresses(announced_port(proc))
        assert addresses == ["0100007F"], f"listening on {addresses} (hex), not 127.0.0.1 alone"
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_the_shipped_systemd_arguments_keep_loopback() -> None:
    """The unit's fallback and the env file's active line leave ``--bind`` at its loopback default; the
    network lines of the env file are comments the user uncomments."""
    unit = (REPO / "systemd" / "neuron-monitor-prometheus.service").read_text()
    env = (REPO / "systemd" / "prometheus.env").read_text()
    active = [
        line.split("=", 1)[1]
        for text in (unit, env)
        for line in text.splitlines()
        if line.startswith(("PROMETHEUS_ARGS=", "Environment=PROMETHEUS_ARGS="))
    ]
    assert len(active) == 2, active
    for args in active:
        assert parse_args(shlex.split(args.removeprefix("PROMETHEUS_ARGS="))).bind == "127.0.0.1", args
    assert "#   PROMETHEUS_ARGS=--port=8000 --bind=0.0.0.0" in env  # the documented way to serve the network
