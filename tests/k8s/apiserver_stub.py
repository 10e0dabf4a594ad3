"""A stand-in Kubernetes API server for tests: plain HTTP on 127.0.0.1 (an ephemeral port), serving
ResourceSlices (list, with field selectors and pages) and ResourceClaims (get) the way the API server shapes them.

Behaviour switches for hostile cases: ``status`` (answer every request with this status and a Status object),
``huge`` (a body of that many bytes), ``chunked`` (no Content-Length), ``drip`` (send the body one byte per
``drip`` seconds, chunked), ``not_json``,
``missing_versions`` (API versions answered 404), ``ignore_node_selector`` (answer the slices of every node
whatever ``spec.nodeName`` the field selector asks for). ``requests`` records (path, query, Authorization header).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


class StubApiServer:
    def __init__(self, token: str = "", tls: tuple[str, str] | None = None) -> None:
        self.token = token
        self.slices: list[dict[str, Any]] = []
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.page_size = 0  # 0: every slice in one page
        self.status = 0
        self.huge = 0
        self.drip = 0.0
        self.chunked = False
        self.not_json = False
        self.ignore_node_selector = False
        self.missing_versions: set[str] = set()
        self.requests: list[tuple[str, dict[str, list[str]], str]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stub._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if tls is not None:  # (certificate, key): HTTPS like the real API server
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._server.daemon_threads = True
        self._server.handle_error = lambda *args: None  # type: ignore[method-assign]  # clients hang up on purpose
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> StubApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, fragment: str) -> int:
        with self._lock:
            return sum(1 for path, _, _ in self.requests if fragment in path)

    # -- serving ---------------------------------------------------------------------------------------------
    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        if self.drip or self.chunked:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            step = 1 if self.drip else 16384
            try:
                for i in range(0, len(body), step):
                    part = body[i : i + step]
                    h.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
                    h.wfile.flush()
                    time.sleep(self.drip)
                h.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            return
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(body)

    def _status(self, h: BaseHTTPRequestHandler, code: int, message: str) -> None:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
        self._send(h, code, orjson.dumps(body))

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(h.path)
        query = urllib.parse.parse_qs(url.query)
        with self._lock:
            self.requests.append((url.path, query, h.headers.get("Authorization", "")))
        if self.token and h.headers.get("Authorization") != f"Bearer {self.token}":
            return self._status(h, 401, "Unauthorized")
        if self.status:
            return self._status(h, self.status, 'resourceslices.resource.k8s.io is forbidden: User "x" cannot list')
        if self.huge:
            return self._send(h, 200, b'{"items": [' + b" " * self.huge + b"]}")
        if self.not_json:
            return self._send(h, 200, b"<html>proxy error</html>")
        parts = url.path.strip("/").split("/")
        # /apis/resource.k8s.io/<version>/resourceslices
        # /apis/resource.k8s.io/<version>/namespaces/<ns>/resourceclaims/<name>
        if len(parts) < 4 or parts[:2] != ["apis", "resource.k8s.io"] or parts[2] in self.missing_versions:
            return self._status(h, 404, "the server could not find the requested resource")
        if parts[3:] == ["resourceslices"]:
            return self._send(h, 200, orjson.dumps(self._slice_list(parts[2], query)))
        if len(parts) == 7 and parts[3] == "namespaces" and parts[5] == "resourceclaims":
            claim = self.claims.get((parts[4], parts[6]))
            if claim is None:
                return self._status(h, 404, f'resourceclaims.resource.k8s.io "{parts[6]}" not found')
            return self._send(h, 200, orjson.dumps(claim))
        return self._status(h, 404, "the server could not find the requested resource")

    def _slice_list(self, version: str, query: dict[str, list[str]]) -> dict[str, Any]:
        selectors = dict(
            term.split("=", 1) for term in ",".join(query.get("fieldSelector", [])).split(",") if "=" in term
        )
        items = [
            s
            for s in self.slices
            if all(
                (s["spec"].get("driver") if k == "spec.driver" else s["spec"].get("nodeName")) == v
                for k, v in selectors.items()
                if k == "spec.driver" or (k == "spec.nodeName" and not self.ignore_node_selector)
            )
        ]
        start = int(query.get("continue", ["0"])[0])
        size = self.page_size or len(items) or 1
        page = items[start : start + size]
        token = str(start + size) if start + size < len(items) else ""
        return {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "ResourceSliceList",
            "metadata": {"resourceVersion": "1", **({"continue": token} if token else {})},
            "items": page,
        }
