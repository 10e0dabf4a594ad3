"""The HTTP front in process: keep-alive, HEAD, gzip negotiation, errors, auth scheme, render-once caching."""

from __future__ import annotations

import asyncio
import base64
import gzip
import http.client
import socket
import time
from collections.abc import Iterator

import bcrypt
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from neuron_monitor.exporters.prometheus.app import ExporterApp, gzip_accepted
from neuron_monitor.exporters.prometheus.auth import BasicAuth, parse_basic
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.server import Connection, HTTPFront, ServerLimits, plain
from neuron_monitor.exporters.prometheus.state import ExporterState
from tests.exporters.prometheus.prom_helpers import one, parse
from tests.exporters.prometheus.prom_reports import runtime, trn2_report


def _report(i: int = 0) -> dict[str, object]:
    return trn2_report([runtime(1, "a", [0, 1], completed=10 + i), runtime(2, "b", [2])], report_time=1.7e9 + i)


@pytest.fixture
def served() -> Iterator[tuple[HTTPFront, ExporterCollector]]:
    state = ExporterState()
    state.apply(_report())
    collector = ExporterCollector(state)
    front = HTTPFront(("127.0.0.1", 0), ExporterApp(collector), limits=ServerLimits(header_timeout=2.0))
    front.start()
    yield front, collector
    front.stop()


def _get(conn: http.client.HTTPConnection, path: str, method: str = "GET", **headers: str) -> tuple[int, dict, bytes]:
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def test_keep_alive_head_and_gzip(served: tuple[HTTPFront, ExporterCollector]) -> None:
    front, collector = served
    conn = http.client.HTTPConnection("127.0.0.1", front.server_address[1], timeout=30)
    status, headers, plain_body = _get(conn, "/metrics")
    assert status == 200 and "content-encoding" not in headers
    status, headers, body = _get(conn, "/metrics", **{"Accept-Encoding": "gzip"})  # same connection
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert (
        gzip.decompress(body).split(b"# HELP neuron_exporter_input_lines")[0]
        == plain_body.split(b"# HELP neuron_exporter_input_lines")[0]
    )
    parse(gzip.decompress(body).decode())
    status, headers, body = _get(conn, "/metrics", "HEAD", **{"Accept-Encoding": "gzip;q=0"})
    assert status == 200 and body == b"" and "content-encoding" not in headers
    assert int(headers["content-length"]) > 1000
    status, _, body = _get(conn, "/healthz")
    assert (status, body) == (200, b"ok\n")
    conn.close()
    assert collector.publisher.serving()[1].renders == 1  # one report, one text render


def test_livez_answers_while_healthz_says_the_reports_are_missing() -> None:
    """``/livez`` is the exporter's own liveness: 200 with no report at all (the daemon's fault, which ``/healthz``
    names with 503), with basic auth on and no credentials."""
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    app = ExporterApp(ExporterCollector(ExporterState()), auth=BasicAuth({"prometheus": hashed}))
    front = HTTPFront(("127.0.0.1", 0), app, limits=ServerLimits(header_timeout=2.0))
    front.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", front.server_address[1], timeout=30)
        assert _get(conn, "/livez")[::2] == (200, b"alive\n")
        assert _get(conn, "/healthz")[0] == 503
        assert _get(conn, "/metrics")[0] == 401
        conn.close()
    finally:
        front.stop()


def test_neuron_metrics_come_first_and_openmetrics_parses(served: tuple[HTTPFront, ExporterCollector]) -> None:
    front, _collector = served
    conn = http.client.HTTPConnection("127.0.0.1", front.server_address[1], timeout=30)
    _, _, body = _get(conn, "/metrics")
    assert not body.startswith(b"# HELP process_") and not body.startswith(b"# HELP neuron_exporter")
    _, headers, body = _get(conn, "/metrics", Accept="application/openmetrics-text; version=1.0.0")
    assert headers["content-type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert list(parse_openmetrics(body.decode()))


def test_bad_requests_get_clear_statuses(served: tuple[HTTPFront, ExporterCollector]) -> None:
    front, _ = served
    port = front.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    assert _get(conn, "/metrics", "POST")[0] == 405
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    assert _get(conn, "/nope")[0] == 404
    conn.close()
    for raw, status in ((b"garbage\r\n\r\n", b"400"), (b"GET / HTTP/2.0\r\n\r\n", b"505")):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(raw)
            assert s.recv(100).split(b" ")[1] == status
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 40000 + b"\r\n\r\n")
        assert s.recv(100).split(b" ")[1] == b"431"


def test_scrapes_render_once_per_report_and_see_new_reports() -> None:
    state = ExporterState()
    collector = ExporterCollector(state)
    state.apply(_report(0))
    bodies = {collector.body([], False, False) for _ in range(5)}
    first = collector.publisher.serving()[1]
    assert first.renders == 1
    for _ in range(3):
        collector.body([], True, True)
        collector.body([], False, True)
    assert first.renders == 2  # text and OpenMetrics, each once
    assert len(bodies) == 1
    state.apply(_report(5))  # a new report: nothing is rendered until a scrape asks
    assert first.renders == 2
    series = parse(collector.body([], False, False).decode())
    assert one(series, "execution_status_total", runtime_tag="a", status_type="completed") == 10 + 15
    assert collector.publisher.serving()[1] is not first


def test_gzip_body_is_one_valid_member_equal_to_the_plain_body() -> None:
    state = ExporterState()
    state.apply(_report())
    collector = ExporterCollector(state)
    for openmetrics in (False, True):
        plain = collector.body([], openmetrics, False)
        packed = collector.body([], openmetrics, True)
        assert gzip.decompress(packed) == plain
        import zlib

        d = zlib.decompressobj(31)
        assert d.decompress(packed) == plain and d.eof and d.unused_data == b""


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("GZip", True),
        ("gzip;q=0", False),
        ("gzip; q=0.000", False),
        ("nogzip", False),
        ("br, *;q=0.1", True),
        ("*;q=0", False),
        ("gzip;q=0, *", False),
        ("", False),
        ("deflate, x-gzip", True),
    ],
)
def test_accept_encoding_q_values(header: str, accepted: bool) -> None:
    assert gzip_accepted(header) is accepted


def test_basic_scheme_is_case_insensitive_and_credentials_cached() -> None:
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()
    auth = BasicAuth({"prom": hashed})
    token = base64.b64encode(b"prom:secret").decode()
    for scheme in ("Basic", "basic", "BASIC"):
        assert parse_basic(f"{scheme} {token}") == ("prom", "secret")
    assert auth.cached(f"basic {token}") is None  # not verified yet
    assert auth.verify(f"basic {token}")
    assert auth.cached(f"BASIC {token}") is True
    assert auth.bcrypt_checks == 1
    wrong = base64.b64encode(b"prom:nope").decode()
    assert not auth.verify(f"Basic {wrong}") and not auth.verify(f"Basic {wrong}")
    assert auth.bcrypt_checks == 2  # a repeated wrong password is answered from the cache
    assert auth.cached("Bearer abc") is False and auth.cached("Basic !!!") is False


def test_runtime_collectors_render_fast_with_client_pythons_bytes() -> None:
    from neuron_monitor.exporters.prometheus.cli import runtime_collectors
    from neuron_monitor.exporters.prometheus.exposition import (
        _openmetrics_encoder,
        _registry,
        _text_encoder,
        render_metrics,
    )

    metrics = [m for c in runtime_collectors() for m in c.collect()]
    assert render_metrics(metrics, False) == _text_encoder(_registry(metrics)).decode()
    assert render_metrics(metrics, True) == _openmetrics_encoder(_registry(metrics)).decode().removesuffix("# EOF\n")


def test_gzip_of_small_and_large_bodies_round_trips() -> None:
    state = ExporterState()
    collector = ExporterCollector(state)
    assert gzip.decompress(collector.body([], False, True)) == collector.body([], False, False)  # nothing served
    big = trn2_report([runtime(d, f"job-{d}", [4 * d, 4 * d + 1]) for d in range(16)])
    state.apply(big)
    for openmetrics in (False, True):
        assert gzip.decompress(collector.body([], openmetrics, True)) == collector.body([], openmetrics, False)


def test_landing_page_shows_status_and_links(served: tuple[HTTPFront, ExporterCollector]) -> None:
    front, collector = served
    report = _report(1)
    report["neuron_runtime_data"][0]["report"]["memory_used"]["error"] = "cannot read"
    collector.state.apply(report)
    conn = http.client.HTTPConnection("127.0.0.1", front.server_address[1], timeout=30)
    status, headers, body = _get(conn, "/")
    page = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    for text in ("ok", "newest report", "stale after", "runtimes</th><td>2", "Neuron devices</th><td>16"):
        assert text in page, text
    assert "<td>memory_used</td><td>error</td><td>1</td>" in page
    assert '<a href="metrics">' in page and '<a href="dashboard.json">' in page
    status, headers, body = _get(conn, "/dashboard.json")
    assert status == 200 and headers["content-type"] == "application/json" and b'"panels"' in body


class _Transport(asyncio.Transport):
    """Just enough of an asyncio transport for a ``Connection`` driven by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted_at: float | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        self.aborted_at = -1.0

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


def test_a_connection_keeps_one_timer_and_is_dropped_only_after_its_deadline() -> None:
    """Deadlines move three times a request; the timer is replaced only when one comes earlier than it, and it
    drops the connection only once the current deadline has passed (an idle keep-alive connection here)."""
    limits = ServerLimits(header_timeout=0.3, idle_timeout=0.8, write_timeout=30.0)
    front = HTTPFront(("127.0.0.1", 0), lambda request: plain(200, "ok"), limits=limits)
    loop = front.loop
    conn = Connection(front)
    transport = _Transport()
    conn.connection_made(transport)
    idle_timer = conn.timer
    assert idle_timer is not None and conn.deadline == pytest.approx(idle_timer.when())
    conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # the head's deadline is earlier: a new timer
    timer = conn.timer
    assert timer is not None and timer is not idle_timer and idle_timer.cancelled()
    assert len(transport.written) == 1 and transport.written[0].startswith(b"HTTP/1.1 200")
    for _ in range(3):  # later requests only move the deadline
        conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.timer is timer and not timer.cancelled()
    last_deadline = conn.deadline  # idle_timeout after the last response
    assert last_deadline > timer.when()

    def aborted() -> None:
        transport.aborted_at = loop.time()

    transport.abort = aborted  # type: ignore[method-assign]
    deadline = time.monotonic() + 30.0
    while transport.aborted_at is None:
        assert time.monotonic() < deadline, "the idle connection was never dropped"
        loop.run_until_complete(asyncio.sleep(0.05))
    assert transport.aborted_at >= last_deadline - 0.001  # never before its deadline
    assert front.closes["idle_timeout"] == 1 and sum(front.closes.values()) == 1
    conn.connection_lost(None)
    assert conn.timer is None
    loop.close()
    front.sock.close()


def test_work_after_a_response_runs_once_the_response_is_written_and_its_failure_harms_nothing() -> None:
    """``HTTPFront.after_response`` (the exporter's early read of stdin) runs right after each response is handed to
    the transport, once per response; if it raises, the response stands and the connection serves on."""
    front = HTTPFront(
        ("127.0.0.1", 0), lambda request: plain(200, "ok") if request.path == "/healthz" else plain(404, "Not Found")
    )
    conn = Connection(front)
    transport = _Transport()
    conn.connection_made(transport)
    seen: list[int] = []

    def after() -> None:
        seen.append(len(transport.written))  # what had been written when it ran
        raise RuntimeError("work after a response failed")

    front.after_response = after
    for n in range(1, 4):
        conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert len(transport.written) == n and transport.written[-1].startswith(b"HTTP/1.1 200")
        assert seen == list(range(1, n + 1))
    conn.data_received(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")  # any response, an error's too
    assert transport.written[-1].startswith(b"HTTP/1.1 404") and seen[-1] == 4
    conn.connection_lost(None)
    front.loop.close()
    front.sock.close()


def test_every_address_falls_back_to_ipv4_on_a_kernel_without_ipv6(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--bind ::`` (every address, IPv6 and IPv4: the DaemonSet's, so that an IPv6 cluster's probes reach it) on a
    kernel booted without IPv6, where an IPv6 socket cannot be made (EAFNOSUPPORT): every IPv4 address instead,
    with a warning, rather than no exporter at all. A specific IPv6 address still fails."""
    import errno

    real = socket.socket

    def no_ipv6(family: int = socket.AF_INET, *args: object, **kwargs: object) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "socket", no_ipv6)
    app = ExporterApp(ExporterCollector(ExporterState()))
    front = HTTPFront(("::", 0), app, limits=ServerLimits(header_timeout=2.0))
    try:
        assert front.sock.family == socket.AF_INET and front.server_address[0] == "0.0.0.0"
    finally:
        front.sock.close()
    with pytest.raises(OSError):
        HTTPFront(("::1", 0), app)
