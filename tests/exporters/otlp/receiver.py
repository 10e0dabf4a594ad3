"""An OTLP/HTTP metrics receiver for the tests: a real HTTP server that decodes every request with the official
opentelemetry-proto classes (protobuf, or the Protobuf JSON mapping for OTLP/JSON) and answers as told.

``Behaviour`` decides each answer: a status (and Retry-After, body, Location), a delay before answering, an
answer body trickled slowly, or no answer at all. Requests are recorded whole (headers, raw body, decoded
request), accepted ones also as series.
"""

from __future__ import annotations

import gzip
import http.server
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # None: an empty ExportMetricsServiceResponse
    delay: float = 0.0  # seconds before the status line
    trickle: float = 0.0  # seconds between body bytes (a slow answer)
    hang: bool = False  # never answer (until the server stops)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    request: ExportMetricsServiceRequest | None
    accepted: bool


class Receiver:
    """A threaded HTTP(S) server on 127.0.0.1 (port 0). ``behaviour(n)`` gives the reply to the n-th request."""

    def __init__(
        self,
        behaviour: Callable[[int], Reply] | None = None,
        tls: ssl.SSLContext | None = None,
        address: tuple[str, int] = ("127.0.0.1", 0),
    ) -> None:
        self.behaviour = behaviour or (lambda n: Reply())
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with receiver.lock:
                    n = len(receiver.received)
                reply = receiver.behaviour(n)
                request = None
                try:
                    body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
                    request = ExportMetricsServiceRequest()
                    if "json" in (self.headers.get("Content-Type") or ""):
                        json_format.Parse(body.decode(), request)
                    else:
                        request.ParseFromString(body)
                except Exception:
                    request = None
                with receiver.lock:
                    receiver.received.append(
                        Received(
                            self.path, dict(self.headers), raw, request, 200 <= reply.status < 300 and not reply.hang
                        )
                    )
                if reply.hang:
                    receiver.stopping.wait(600)
                    return
                if reply.delay:
                    receiver.stopping.wait(reply.delay)
                body_out = reply.body if reply.body is not None else ExportMetricsServiceResponse().SerializeToString()
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", reply.headers.get("Content-Type", "application/x-protobuf"))
                self.send_header("Content-Length", str(len(body_out)))
                self.end_headers()
                if reply.trickle:
                    for i in range(len(body_out)):
                        if receiver.stopping.wait(reply.trickle):
                            return
                        self.wfile.write(body_out[i : i + 1])
                        self.wfile.flush()
                else:
                    self.wfile.write(body_out)

        self.server = http.server.ThreadingHTTPServer(address, Handler)
        self.host = address[0]
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/v1/metrics"

    def accepted(self) -> list[ExportMetricsServiceRequest]:
        with self.lock:
            return [r.request for r in self.received if r.accepted and r.request is not None]

    def count(self) -> int:
        with self.lock:
            return len(self.received)

    def wait_for(self, pred: Callable[[], bool], timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"receiver: condition not reached within {timeout} s ({self.count()} requests)")
            time.sleep(0.05)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def series(request: ExportMetricsServiceRequest) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]]:
    """Every data point of a request: (metric name, sorted attributes) -> {value, start, time, kind, unit,
    monotonic, temporality, resource}."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
    for rm in request.resource_metrics:
        resource = {kv.key: kv.value.string_value for kv in rm.resource.attributes}
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                data = getattr(m, kind)
                for p in data.data_points:
                    attrs = tuple(sorted((kv.key, kv.value.string_value) for kv in p.attributes))
                    out[(m.name, attrs)] = {
                        "value": p.as_double,
                        "start": p.start_time_unix_nano,
                        "time": p.time_unix_nano,
                        "kind": kind,
                        "unit": m.unit,
                        "description": m.description,
                        "monotonic": getattr(data, "is_monotonic", None),
                        "temporality": getattr(data, "aggregation_temporality", None),
                        "resource": resource,
                        "scope": (sm.scope.name, sm.scope.version),
                    }
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
