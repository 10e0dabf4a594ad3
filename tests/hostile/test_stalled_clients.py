"""Clients that send ``GET /metrics`` and never read (issue 39, item 3).

Before: each such connection made its own copy of the body (a text too long to keep was even rendered again per
connection): 200 of them, on issue 32's long-tags report (a 12.3 MB line, a 46 MB text), took the exporter's
peak RSS to 714x the line (8.8 GB) and kept the loop rendering, so a scrape took 46 s and ingestion stalled; a
full house of them refused every new connection; nothing counted them. After: a connection holds at most about
two 64 KiB chunks of its own (the body is shared bytes, or inflated from the kept compressed text as it is
read), is closed at the write timeout and counted in ``neuron_exporter_connections_closed_total``; the 513th
connection evicts the response that started first. Peak RSS with 200 stalled clients stays at the 7.9x the line
itself costs (docs/prometheus.md).
"""

from __future__ import annotations

import gzip
import http.client
import socket
import time
from pathlib import Path

import pytest

from neuron_monitor.exporters.prometheus.app import ExporterApp
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.server import HTTPFront, ServerLimits
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_helpers import parse
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.hostile.test_exporter_http import _scrape, _wait_closed
from tests.hostile.test_exporter_memory import _long_tags

DEADLINE = 60.0
STALLED = 200


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key}")


def _get(port: int, gzipped: bool = False) -> bytes:
    """A whole /metrics body (http.client raises IncompleteRead if fewer than Content-Length bytes arrive)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE * 3)
    try:
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if gzipped else {})
        resp = conn.getresponse()
        assert resp.status == 200
        return resp.read()
    finally:
        conn.close()


def _stalled(port: int, count: int, started: bool = True) -> list[socket.socket]:
    """``count`` connections that ask for /metrics and never read (a 4 KiB receive buffer each), once the
    server has started answering each."""
    out = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        out.append(s)
    for s in out if started else ():  # each response has started (peeked at, not read)
        s.settimeout(DEADLINE)
        assert s.recv(1, socket.MSG_PEEK) == b"H"
    return out


def _large_report() -> dict[str, object]:
    """48 runtimes with 1,000-character tags on 8 cores each: a 6.6 MB text, more than the 4 MB the kernel's
    loopback buffers take from a connection whose client does not read."""
    tags = [f"big{i:03d}-" + "x" * 1000 for i in range(48)]
    return trn2_report([runtime(1000 + i, tag, [(8 * i + k) % 64 for k in range(8)]) for i, tag in enumerate(tags)])


def _closes(body: bytes) -> dict[str, float]:
    if body.startswith(b"\x1f\x8b"):
        body = gzip.decompress(body)
    closes = {
        dict(labels)["reason"]: value
        for (name, labels), value in parse(body.decode()).items()
        if name == "neuron_exporter_connections_closed_total"
    }
    assert closes, "no neuron_exporter_connections_closed_total"
    return closes


@pytest.mark.e2e
def test_stalled_clients_of_a_huge_text_pin_no_copy_and_scrapes_get_the_whole_report() -> None:
    """200 clients that never read the 46 MB text of a 12.3 MB line: peak RSS above a normal report's stays
    within 10x the line (the exporter's promise for that line alone), and a scrape meanwhile gets all of it."""
    line, served = _long_tags()
    exporter = ExporterProcess()
    stalled: list[socket.socket] = []
    try:
        exporter.send(trn2_report())
        deadline = time.monotonic() + DEADLINE
        while b"job-15" not in _get(exporter.port):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        _get(exporter.port, gzipped=True)
        baseline = _status(exporter.proc.pid, "VmRSS")
        exporter.send(line)
        deadline = time.monotonic() + DEADLINE * 3
        while served not in (whole := _get(exporter.port)):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        stalled = _stalled(exporter.port, STALLED)
        again = _get(exporter.port)  # the whole Neuron part, as before the stalled clients came
        neuron_part = whole.split(b"# HELP neuron_exporter_")[0]
        assert len(neuron_part) > 40_000_000 and again.startswith(neuron_part)
        assert b'runtime_tag="t0246-' in again and again.endswith(b"\n")
        peak = _status(exporter.proc.pid, "VmHWM")
    finally:
        for s in stalled:
            s.close()
        exporter.stop()
    print(f"{STALLED} stalled clients: line {len(line) / 1e6:.1f} MB, peak {(peak - baseline) / len(line):.1f}x")
    assert peak - baseline <= 10 * len(line), (peak, baseline, len(line))


@pytest.mark.e2e
def test_stalled_clients_are_closed_at_the_write_timeout_counted_and_never_hold_reports_back() -> None:
    exporter = ExporterProcess("--write-timeout", "10")
    stalled: list[socket.socket] = []
    try:
        exporter.send(_large_report())
        exporter.wait_for("/metrics", lambda status, body: "big047-x" in body, timeout=DEADLINE)
        assert _closes(_get(exporter.port, gzipped=True)) == {
            "write_timeout": 0,
            "header_timeout": 0,
            "idle_timeout": 0,
            "evicted": 0,
            "refused": 0,
        }
        stalled = _stalled(exporter.port, STALLED // 2)
        # a newer report while they stall is read and served whole
        exporter.send(trn2_report([runtime(2000 + d, f"fresh-{d}", [4 * d]) for d in range(16)], report_time=1.7e9 + 5))
        body = exporter.wait_for("/metrics", lambda status, body: 'runtime_tag="fresh-15"' in body, timeout=DEADLINE)
        assert "big000-x" not in body and 'runtime_tag="fresh-0"' in body
        deadline = time.monotonic() + DEADLINE * 2
        while (closes := _closes(_get(exporter.port, gzipped=True)))["write_timeout"] < len(stalled):
            assert time.monotonic() < deadline, closes
            time.sleep(0.5)
        assert _wait_closed(stalled, time.monotonic() + DEADLINE) == len(stalled)
    finally:
        for s in stalled:
            s.close()
        exporter.stop()


def test_a_full_house_of_stalled_clients_cannot_lock_a_scraper_out() -> None:
    """Past max_connections, the response that started first is dropped (counted as evicted) for a newcomer."""
    state = ExporterState()
    assert state.apply(_large_report())
    front = HTTPFront(("127.0.0.1", 0), ExporterApp(ExporterCollector(state)), limits=ServerLimits(max_connections=32))
    front.start()
    port = front.server_address[1]
    stalled: list[socket.socket] = []
    try:
        assert len(_get(port)) > 6_000_000
        stalled = _stalled(port, 40, started=False)  # the first 8 are evicted as the last 8 come
        deadline = time.monotonic() + DEADLINE
        while front.closes["evicted"] < 8:  # 32 stalled responses, each newcomer evicted one of them
            assert time.monotonic() < deadline, front.closes
            time.sleep(0.05)
        assert [_scrape(port) for _ in range(5)] == [200] * 5
        assert front.closes["evicted"] >= 9 and front.closes["refused"] == 0  # the first scrape evicted one more
    finally:
        for s in stalled:
            s.close()
        front.stop()
