"""A small client of the Kubernetes API server: one JSON request and its answer, bounded in time and size.

Reads: ``GET <server><path>?<query>`` (``neuron-monitor-taint`` also POSTs, PUTs, DELETEs one object) with the
pod's service account token (``Authorization: Bearer``), over HTTPS checked against the cluster CA, or over plain
HTTP to a loopback address only (tests, ``kubectl proxy``).
Returns: the decoded JSON object. Every failure is a ``KubeApiError`` whose text is one short line: the status
and the API's own ``message`` clipped, never the token, never a whole response body.

Bounds: a whole request (connect, headers, body) ends at ``timeout`` seconds (``util.deadline.exchange``: a total,
so a server that drips one byte at a time cannot hold the caller); a body over ``max_bytes`` is refused (by its
Content-Length when given, else while reading). The token file is read again on every request
(the kubelet rotates projected tokens), with the same regular-file and size discipline as every other input.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any

import orjson

from neuron_monitor.util.deadline import BodyTooLarge, DeadlineExceeded, exchange
from neuron_monitor.util.inputfile import InputFileError, read_regular, shown
from neuron_monitor.util.sanitize import url_shown

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TOKEN_FILE = f"{SERVICE_ACCOUNT_DIR}/token"
DEFAULT_CA_FILE = f"{SERVICE_ACCOUNT_DIR}/ca.crt"
TOKEN_MAX_BYTES = 64 * 1024
CA_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT = 5.0
_MESSAGE_CHARS = 160


class KubeApiError(Exception):
    """The API server could not be read; ``str()`` is one bounded line, ``status`` the HTTP status (0 if none)."""

    def __init__(self, reason: str, status: int = 0) -> None:
        super().__init__(reason)
        self.status = status


def in_cluster_server(environ: dict[str, str] | None = None) -> str | None:
    """``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` as every pod sees it, or None outside one."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
    port = env.get("KUBERNETES_SERVICE_PORT", "").strip() or "443"
    if not host or not port.isdigit():
        return None
    if ":" in host:  # an IPv6 service address
        host = f"[{host}]"
    return f"https://{host}:{port}"


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (the only places a token may go over plain HTTP)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def one_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    """Printable ASCII only, one line, clipped: API text reaches logs and the report's ``error``."""
    out = "".join(ch if " " <= ch <= "~" else "?" for ch in text[: limit + 1])
    return out if len(out) <= limit else out[:limit] + "..."


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str


def parse_server(server: str) -> Endpoint:
    """Check an API server URL: https anywhere, http only to loopback (a token never travels in clear)."""
    url = urllib.parse.urlsplit(server)
    if url.scheme not in ("https", "http") or not url.hostname:
        raise KubeApiError(f"API server {shown(url_shown(server))}: expected an http(s)://host[:port] URL")
    if url.scheme == "http" and not is_loopback(url.hostname):
        raise KubeApiError(f"API server {shown(url_shown(server))}: plain http is allowed to a loopback address only")
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise KubeApiError(f"API server {shown(url_shown(server))}: bad port") from None
    return Endpoint(url.scheme, url.hostname, port, url.path.rstrip("/"))


class KubeApi:
    """Requests against one API server; safe to use from one thread at a time (the watcher's)."""

    def __init__(
        self,
        server: str,
        token_file: str | None = DEFAULT_TOKEN_FILE,
        ca_file: str | None = DEFAULT_CA_FILE,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        message_chars: int = _MESSAGE_CHARS,
    ) -> None:
        self.endpoint = parse_server(server)
        self.server = server
        self.token_file = token_file
        self.ca_file = ca_file
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.message_chars = message_chars  # of the API's ``message`` in an error (an admission policy's is long)
        self._ssl: ssl.SSLContext | None = None
        self.requests = 0

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            ctx = ssl.create_default_context()
            if self.ca_file:
                try:
                    pem = read_regular(self.ca_file, CA_MAX_BYTES, "cluster CA file")
                    ctx.load_verify_locations(cadata=pem.decode("ascii", "replace"))
                except (InputFileError, ssl.SSLError, ValueError) as e:
                    raise KubeApiError(f"cluster CA {self.ca_file}: {one_line(str(e))}") from None
            self._ssl = ctx
        return self._ssl

    def _token(self) -> str:
        if not self.token_file:
            return ""
        try:
            raw = read_regular(self.token_file, TOKEN_MAX_BYTES, "service account token")
        except InputFileError as e:
            raise KubeApiError(str(e)) from None
        token = raw.decode("ascii", "replace").strip()
        if not token or any(not ("!" <= ch <= "~") for ch in token):
            raise KubeApiError(f"service account token {self.token_file}: empty or not a bearer token")
        return token

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        ep = self.endpoint
        if ep.scheme == "https":
            return http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout, context=self._context())
        return http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        """GET ``path`` (already quoted) and return its decoded JSON; raises ``KubeApiError``."""
        return self.request("GET", path, query)

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> Any:
        """``method`` ``path`` (already quoted) with ``body`` sent as JSON, within ``timeout`` seconds whole (default
        and at most the client's); returns the decoded JSON answer (``{}`` for an empty one) of a 2xx status, else
        raises ``KubeApiError`` carrying the status (0: no HTTP answer)."""
        limit = self.timeout if timeout is None else max(0.001, min(timeout, self.timeout))
        target = self.endpoint.base_path + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json", "User-Agent": "neuron-monitor"}
        payload = None
        if body is not None:
            payload = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        token = self._token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.requests += 1
        what = f"{method} {path}"
        try:
            answer = exchange(self._connection(limit), method, target, headers, limit, self.max_bytes, payload)
        except DeadlineExceeded:
            raise KubeApiError(f"{what}: no complete answer within {limit:g} s") from None
        except BodyTooLarge as e:
            raise KubeApiError(f"{what}: {e}") from None
        except (OSError, http.client.HTTPException) as e:
            raise KubeApiError(f"{what}: {one_line(type(e).__name__ + ': ' + str(e))}") from None
        raw = answer.body
        if not 200 <= answer.status < 300:
            raise KubeApiError(f"{what}: HTTP {answer.status}{_status_message(raw, self.message_chars)}", answer.status)
        if not raw.strip():
            return {}
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise KubeApiError(f"{what}: the answer is not JSON") from None


def _status_message(body: bytes, limit: int = _MESSAGE_CHARS) -> str:
    """``: <message>`` from a Kubernetes Status object, clipped and cleaned; empty if there is none."""
    if not body or len(body) > 64 * 1024:
        return ""
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return f": {one_line(message, limit)}" if isinstance(message, str) and message else ""
