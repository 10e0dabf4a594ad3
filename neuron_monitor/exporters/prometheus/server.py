"""The HTTP(S) server: ``/metrics``, ``/healthz`` and a landing page at ``/``.

``/metrics`` renders the newest report at request time in the format the scraper asks for (Prometheus text or
OpenMetrics), gzip-compressed when accepted. ``/healthz`` answers 200 ``ok`` while a fresh report is served and
stdin is open, else 503 with the reason; it needs no credentials, so kubelet probes work with basic auth on.
With a web config, connections are TLS (handshake in the connection's thread) and ``/`` and ``/metrics`` need
basic auth when users are configured (401 otherwise).
"""

from __future__ import annotations

import gzip
import html
import logging
import socket
import ssl
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from neuron_monitor import __version__
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.exporters.prometheus.webconfig import BasicAuth, TLSContext

log = logging.getLogger("neuron_monitor.exporters.prometheus.server")

LANDING = """<!DOCTYPE html>
<html><head><title>neuron-monitor-prometheus</title></head>
<body><h1>neuron-monitor-prometheus</h1>
<p>Serves neuron-monitor reports read from stdin as Prometheus metrics. Version {version}.</p>
<p>Status: {status}</p>
<ul><li><a href="metrics">Metrics</a></li><li><a href="healthz">Health</a></li></ul>
</body></html>
"""


class ExporterApp:
    """What the handler needs: the collectors to render, the state for health, auth and extra headers."""

    def __init__(
        self,
        exporter: ExporterCollector,
        others: list[Collector] | None = None,
        auth: BasicAuth | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.exporter = exporter
        self.others = others or []
        self.state: ExporterState = exporter.state
        self.auth = auth or BasicAuth({})
        self.headers = headers or {}


class ExporterHandler(BaseHTTPRequestHandler):
    server: ExporterHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = 30
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall
    server_version = f"neuron-monitor-prometheus/{__version__}"

    def setup(self) -> None:
        super().setup()
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**self.server.app.headers, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self) -> bool:
        if self.server.app.auth.check(self.headers.get("Authorization")):
            return True
        self._send(
            401,
            b"Unauthorized\n",
            "text/plain; charset=utf-8",
            {"WWW-Authenticate": 'Basic realm="neuron-monitor-prometheus"'},
        )
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        app = self.server.app
        if path == "/healthz":
            view = app.state.view()
            self._send(200 if view.healthy else 503, (view.reason + "\n").encode(), "text/plain; charset=utf-8")
        elif path == "/metrics":
            if self._authorized():
                self._metrics()
        elif path == "/":
            if self._authorized():
                status = html.escape(app.state.view().reason)
                body = LANDING.format(version=__version__, status=status).encode()
                self._send(200, body, "text/html; charset=utf-8")
        else:
            self._send(404, b"Not Found\n", "text/plain; charset=utf-8")

    do_HEAD = do_GET

    def _metrics(self) -> None:
        _, content_type = choose_encoder(self.headers.get("Accept"))
        openmetrics = content_type.startswith("application/openmetrics-text")
        app = self.server.app
        body = app.exporter.scrape(app.others, openmetrics)
        extra = {}
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body, compresslevel=1)
            extra["Content-Encoding"] = "gzip"
        self._send(200, body, content_type, extra)


class ExporterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: ExporterApp, tls: TLSContext | None = None) -> None:
        self.app = app
        self.tls = tls
        self.address_family = _family(address[0])
        super().__init__(address, ExporterHandler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            if self.tls.maybe_reload(time.monotonic()):
                log.info("Refreshing TLS certificates")
            sock = self.tls.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed connection (bad TLS handshake, reset, timeout) is logged in one line, never a traceback."""
        import sys

        err = sys.exc_info()[1]
        log.debug("connection from %s failed: %s", client_address, err)


def _family(host: str) -> socket.AddressFamily:
    if ":" in host:
        return socket.AF_INET6
    return socket.AF_INET
