"""Hostile clients against the Prometheus exporter's HTTP front: crowds, slowloris, password sprays, user probing.

Each test asserts outcomes (every scrape answered, slow sockets dropped, bcrypt bounded), never timings tighter
than generous deadlines, so a busy 2-vCPU runner passes them as reliably as an idle one.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import threading
import time

import bcrypt
import pytest

from neuron_monitor.exporters.prometheus import auth as auth_module
from neuron_monitor.exporters.prometheus.app import ExporterApp
from neuron_monitor.exporters.prometheus.auth import BasicAuth, bcrypt_cost
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.server import HTTPFront, ServerLimits
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_helpers import parse
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report

DEADLINE = 60.0


def _front(limits: ServerLimits, auth: BasicAuth | None = None) -> tuple[HTTPFront, ExporterCollector]:
    state = ExporterState()
    state.apply(trn2_report([runtime(1, "a", [0, 1])], vcpus=8, devices=2))
    collector = ExporterCollector(state)
    app = ExporterApp(collector, auth=auth)
    front = HTTPFront(("127.0.0.1", 0), app, limits=limits)
    app.front = front
    front.start()
    return front, collector


def _scrape(port: int, auth: str | None = None, check: bool = True) -> int:
    """A scrape on a new connection: its status (the whole body was read; ``check`` parses it too)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": auth} if auth else {})
        resp = conn.getresponse()
        body = resp.read()  # http.client raises IncompleteRead if fewer than Content-Length bytes arrive
        if resp.status == 200:
            if check:
                parse(body.decode())
            assert body.endswith(b"\n") and b"# TYPE neuron_exporter_up gauge" in body
        return resp.status
    finally:
        conn.close()


def _wait_closed(sockets: list[socket.socket], deadline: float) -> int:
    """How many of ``sockets`` the server closed before ``deadline`` (monotonic)."""
    closed = 0
    for s in sockets:
        s.settimeout(max(deadline - time.monotonic(), 0.1))
        try:
            while s.recv(4096):
                pass
            closed += 1
        except ConnectionResetError:
            closed += 1
        except OSError:
            pass
    return closed


@pytest.mark.e2e
def test_200_concurrent_scrapes_are_all_answered() -> None:
    exporter = ExporterProcess()
    try:
        exporter.send(trn2_report([runtime(d, f"job-{d}", [4 * d, 4 * d + 1]) for d in range(16)]))
        exporter.wait_for("/metrics", lambda status, body: "execution_status_total" in body, timeout=DEADLINE)
        start = threading.Barrier(200)
        results: list[int | str] = []

        def client() -> None:
            start.wait()
            try:
                results.append(_scrape(exporter.port, check=False))
            except OSError as e:
                results.append(repr(e))

        threads = [threading.Thread(target=client) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE * 2)
        assert results == [200] * 200
    finally:
        exporter.stop()


def test_slowloris_sockets_are_dropped_before_rendering_and_scrapes_go_on() -> None:
    front, collector = _front(ServerLimits(header_timeout=1.0, idle_timeout=2.0, max_connections=128))
    port = front.server_address[1]
    slow: list[socket.socket] = []
    stop = threading.Event()
    try:
        for i in range(300):  # more than max_connections: idle and dripping sockets must not lock scrapers out
            s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"G")
            slow.append(s)
        dripping = slow[:40]

        def drip() -> None:  # one header byte every 0.2 s: a per-byte timeout would never fire
            while not stop.wait(0.2):
                for s in dripping:
                    with contextlib.suppress(OSError):
                        s.send(b"X")

        threading.Thread(target=drip, daemon=True).start()
        assert [_scrape(port) for _ in range(20)] == [200] * 20
        closed = _wait_closed(slow, time.monotonic() + DEADLINE)
        assert closed == len(slow)
        assert front.closes["header_timeout"] + front.closes["idle_timeout"] + front.closes["evicted"] >= len(slow)
        assert front.counts.get("200") == 20  # the slow sockets got no answer at all, rendered nothing
        assert collector.publisher.serving()[1].renders == 1
    finally:
        stop.set()
        for s in slow:
            s.close()
        front.stop()


def test_a_password_spray_keeps_bcrypt_bounded_and_scrapes_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=8)).decode()
    auth = BasicAuth({"prometheus": hashed})
    running, peak, lock = [0], [0], threading.Lock()
    real_checkpw = bcrypt.checkpw

    def counting_checkpw(password: bytes, hashed_password: bytes) -> bool:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            return real_checkpw(password, hashed_password)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(auth_module.bcrypt, "checkpw", counting_checkpw)
    front, _ = _front(ServerLimits(max_auth_pending=32), auth)
    port = front.server_address[1]
    good = "Basic " + base64.b64encode(b"prometheus:right").decode()
    try:
        assert _scrape(port, good) == 200  # Prometheus's credentials are verified once, then cached
        answers: list[int] = []

        def attacker(n: int) -> None:
            for k in range(4):
                wrong = base64.b64encode(f"prometheus:guess-{n}-{k}".encode()).decode()
                answers.append(_scrape(port, f"Basic {wrong}"))

        threads = [threading.Thread(target=attacker, args=(n,)) for n in range(50)]
        for t in threads:
            t.start()
        legit = [_scrape(port, good) for _ in range(20)]
        for t in threads:
            t.join(DEADLINE * 4)
        assert legit == [200] * 20
        assert len(answers) == 200 and set(answers) <= {401, 503}
        assert peak[0] <= auth.max_concurrent
    finally:
        front.stop()


def test_unknown_users_cost_the_same_bcrypt_as_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=6)).decode()
    auth = BasicAuth({"prometheus": hashed})
    costs: list[int] = []
    real_checkpw = bcrypt.checkpw

    def recording_checkpw(password: bytes, hashed_password: bytes) -> bool:
        costs.append(bcrypt_cost(hashed_password))
        return real_checkpw(password, hashed_password)

    monkeypatch.setattr(auth_module.bcrypt, "checkpw", recording_checkpw)
    front, _ = _front(ServerLimits(), auth)
    port = front.server_address[1]
    try:
        for user in ("prometheus", "nobody", "admin"):
            header = "Basic " + base64.b64encode(f"{user}:wrong".encode()).decode()
            assert _scrape(port, header) == 401
        assert costs == [6, 6, 6]  # one bcrypt check each, at the configured cost, whether the user exists or not
    finally:
        front.stop()


def test_idle_crowd_beyond_the_connection_limit_cannot_lock_out_a_scrape() -> None:
    front, _ = _front(ServerLimits(max_connections=32, idle_timeout=60.0))
    port = front.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) for _ in range(100)]
    try:
        assert [_scrape(port) for _ in range(5)] == [200] * 5
        assert front.closes["evicted"] >= 100 - 32
    finally:
        for s in idle:
            s.close()
        front.stop()
