"""The pipe design of the systemd units and the DaemonSet, with the real daemon and the real exporter.

systemd's ListenFIFO (and the DaemonSet's `1<>fifo` / `0<>fifo` redirections) give both processes a FIFO
descriptor opened read-write, and something keeps it open. This test builds exactly that: it holds the FIFO open
read-write as systemd does, starts `neuron-monitor` with stdout on it and `neuron-monitor-prometheus` with stdin on
it, then kills each side in turn and checks that the other carries on and that reports flow again.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def reports_served(port: int) -> float:
    m = re.search(r"^neuron_exporter_reports_total (\S+)$", scrape(port), re.M)
    return float(m.group(1)) if m else -1.0


def wait_until(pred, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


@pytest.fixture
def fifo_fd(tmp_path: Path) -> Iterator[int]:
    path = tmp_path / "prometheus.reports"
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)  # what systemd's ListenFIFO holds
    yield fd
    os.close(fd)


def start_daemon(fd: int, conf: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--no-imds"],
        stdin=subprocess.DEVNULL,
        stdout=fd,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def start_exporter(fd: int, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.exporters.prometheus.cli", "--port", str(port), "--bind", "127.0.0.1"],
        stdin=fd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_either_side_restarts_alone(fifo_fd: int, tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "200ms", "system_metrics": [{"type": "memory_info"}, {"type": "vcpu_usage"}]}')
    port = free_port()
    daemon = start_daemon(fifo_fd, conf)
    exporter = start_exporter(fifo_fd, port)
    try:
        wait_until(lambda: "system_memory_total_bytes" in scrape(port))

        # the daemon dies hard: the exporter must neither see EOF nor exit, and must serve the new daemon's reports
        daemon.kill()
        daemon.wait()
        time.sleep(0.5)
        assert exporter.poll() is None
        assert "neuron_exporter_input_closed 0.0" in scrape(port)
        before = reports_served(port)
        daemon = start_daemon(fifo_fd, conf)
        wait_until(lambda: reports_served(port) > before + 3)

        # the exporter dies hard: the daemon must not get SIGPIPE, and a new exporter picks the stream up
        exporter.kill()
        exporter.wait()
        time.sleep(1.0)
        assert daemon.poll() is None, daemon.stderr.read().decode() if daemon.stderr else ""
        exporter = start_exporter(fifo_fd, port)
        wait_until(lambda: reports_served(port) > 3)
        assert daemon.poll() is None
    finally:
        stop(daemon)
        stop(exporter)


def healthz(port: int, path: str = "/healthz") -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_a_hung_daemon_needs_its_own_probe(fifo_fd: int, tmp_path: Path) -> None:
    """A daemon that hangs (stopped here with SIGSTOP) writes no reports: the exporter's /healthz turns 503, and
    stays 503 across a restart of the exporter, because the daemon holds the FIFO read-write and never sees its
    reader go. So restarting the exporter cannot recover the pod: the DaemonSet's daemon container carries its own
    liveness probe on the exporter's /healthz, and the exporter's probe is /livez, which stays 200 meanwhile (a
    restart of a working exporter for the daemon's fault would only open gaps in the scrapes).

    Before (found 2026-11-29): only the exporter had a probe, and the manifest and docs/running.md said its restart
    closed the pipe's reader "so a hung daemon is restarted too"."""
    conf = tmp_path / "monitor.conf"
    conf.write_text('{"period": "200ms", "system_metrics": [{"type": "memory_info"}]}')
    port = free_port()
    daemon = start_daemon(fifo_fd, conf)
    exporter = start_exporter(fifo_fd, port)
    try:
        wait_until(lambda: healthz(port) == 200, timeout=60)
        daemon.send_signal(signal.SIGSTOP)
        wait_until(lambda: healthz(port) == 503, timeout=60)
        assert healthz(port, "/livez") == 200  # the exporter itself is fine: its own probe must not restart it
        stop(exporter)
        exporter = start_exporter(fifo_fd, port)
        wait_until(lambda: healthz(port) == 503, timeout=60)  # the new exporter answers, and still 503
        time.sleep(1.0)
        assert healthz(port) == 503 and daemon.poll() is None  # the hung daemon is neither gone nor recovered
    finally:
        daemon.send_signal(signal.SIGCONT)
        stop(daemon)
        stop(exporter)
    docs = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "daemonset.yaml").read_text())
    pod = next(d for d in docs if d and d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in pod["containers"]}
    exporter_port = by_name["exporter"]["ports"][0]["containerPort"]
    assert pod["hostNetwork"] is True  # one network namespace: the daemon's probe reaches the exporter's port
    assert by_name["neuron-monitor"]["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": exporter_port}
    assert by_name["exporter"]["livenessProbe"]["httpGet"]["path"] == "/livez"
