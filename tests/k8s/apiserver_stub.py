"""A stand-in Kubernetes API server for tests: plain HTTP on 127.0.0.1 (an ephemeral port), serving
ResourceSlices (list, with field selectors and pages) and ResourceClaims (get) the way the API server shapes them.

Behaviour switches for hostile cases: ``status`` (answer every request with this status and a Status object),
``huge`` (a body of that many bytes), ``chunked`` (no Content-Length), ``drip`` (send the body one byte per
``drip`` seconds, chunked), ``not_json``,
``missing_versions`` (API versions answered 404), ``ignore_node_selector`` (answer the slices of every node
whatever ``spec.nodeName`` the field selector asks for). ``requests`` records (path, query, Authorization header).

DeviceTaintRules (cluster scoped, ``/apis/resource.k8s.io/<version>/devicetaintrules[/<name>]``): list with a label
selector (equality terms; ``ignore_label_selector`` answers every rule), create (409 when the name exists), get,
replace (409 on a stale ``metadata.resourceVersion``) and delete (409 when ``preconditions.resourceVersion`` is
stale), kept in ``taint_rules`` by name with a ``resourceVersion`` and ``uid`` set by the server. For hostile
cases on these paths only: ``deny`` (a function of (method, object) returning a refusal message: answered 403 as
an admission policy would), ``fail_next`` (statuses answered to the next requests, one each), ``rule_delay``
(seconds to wait before answering), ``writes`` counts the successful writes by method.
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
        self.taint_rules: dict[str, dict[str, Any]] = {}
        self.ignore_label_selector = False
        self.deny: Any = None
        self.fail_next: list[int] = []
        self.rule_delay = 0.0
        self.writes: dict[str, int] = {}
        self._version = 100
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stub._serve(self)

            do_POST = do_PUT = do_DELETE = do_GET

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
        if len(parts) >= 4 and parts[:2] == ["apis", "resource.k8s.io"] and parts[3] == "devicetaintrules":
            if parts[2] in self.missing_versions:
                return self._status(h, 404, "the server could not find the requested resource")
            return self._serve_rules(h, parts[4:], query)
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

    # -- DeviceTaintRules ------------------------------------------------------------------------------------
    def _body(self, h: BaseHTTPRequestHandler) -> Any:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        return orjson.loads(raw) if raw else None

    def _serve_rules(self, h: BaseHTTPRequestHandler, rest: list[str], query: dict[str, list[str]]) -> None:
        method = h.command
        body = self._body(h) if method in ("POST", "PUT", "DELETE") else None
        if self.rule_delay:
            time.sleep(self.rule_delay)
        with self._lock:
            fail = self.fail_next.pop(0) if self.fail_next else 0
        if fail:
            return self._status(h, fail, f"injected failure {fail}")
        name = rest[0] if rest else ""
        if method in ("POST", "PUT", "DELETE") and self.deny is not None:
            target = body if method != "DELETE" else self.taint_rules.get(name)
            message = self.deny(method, target) if target is not None else ""
            if message:
                return self._status(
                    h,
                    403,
                    f'devicetaintrules.resource.k8s.io "{name or _name_of(body)}" is forbidden: '
                    f"ValidatingAdmissionPolicy 'neuron-monitor-taint' with binding 'neuron-monitor-taint' "
                    f"denied request: {message}",
                )
        with self._lock:
            if method == "GET" and not name:
                return self._send(h, 200, orjson.dumps(self._rule_list(query)))
            if method == "POST" and not name:
                new = _name_of(body)
                if new in self.taint_rules:
                    return self._status(h, 409, f'devicetaintrules.resource.k8s.io "{new}" already exists')
                return self._send(h, 201, orjson.dumps(self._store(body, "POST")))
            current = self.taint_rules.get(name)
            if current is None:
                return self._status(h, 404, f'devicetaintrules.resource.k8s.io "{name}" not found')
            rv = current["metadata"]["resourceVersion"]
            if method == "GET":
                return self._send(h, 200, orjson.dumps(current))
            if method == "PUT":
                if body["metadata"].get("resourceVersion") != rv:
                    return self._status(h, 409, "the object has been modified; please apply your changes")
                body["metadata"]["uid"] = current["metadata"]["uid"]
                return self._send(h, 200, orjson.dumps(self._store(body, "PUT")))
            if method == "DELETE":
                wanted = ((body or {}).get("preconditions") or {}).get("resourceVersion")
                if wanted is not None and wanted != rv:
                    return self._status(h, 409, "Precondition failed: ResourceVersion in precondition does not match")
                del self.taint_rules[name]
                self.writes["DELETE"] = self.writes.get("DELETE", 0) + 1
                return self._send(h, 200, orjson.dumps({"kind": "Status", "status": "Success"}))
        return self._status(h, 405, "method not allowed")

    def _store(self, obj: dict[str, Any], method: str = "") -> dict[str, Any]:
        self._version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._version)}}
        obj["metadata"].setdefault("uid", f"uid-{self._version}")
        self.taint_rules[obj["metadata"]["name"]] = obj
        if method:
            self.writes[method] = self.writes.get(method, 0) + 1
        return obj

    def _rule_list(self, query: dict[str, list[str]]) -> dict[str, Any]:
        terms = [t.split("=", 1) for t in ",".join(query.get("labelSelector", [])).split(",") if "=" in t]
        items = [
            r
            for r in self.taint_rules.values()
            if self.ignore_label_selector or all((r["metadata"].get("labels") or {}).get(k) == v for k, v in terms)
        ]
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRuleList",
            "metadata": {"resourceVersion": str(self._version)},
            "items": items,
        }

    def add_rule(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Put a rule in place as another writer would (counted in no ``writes``)."""
        with self._lock:
            return self._store(obj)


def _name_of(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""
