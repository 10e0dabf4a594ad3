"""One HTTP exchange with the receiver, bounded in time and memory whatever the receiver does.

``Transport.post`` sends one request and returns an ``Answer``; it never raises. Bounds:

- a total deadline per exchange (``timeout``: connect, TLS handshake, sending, the status line, the headers and
  the answer's body together). A watchdog shuts the socket down when it passes, so a receiver that trickles one
  byte at a time or never answers cannot hold the sender longer;
- at most ``MAX_ANSWER_BYTES`` of an answer's body are read (a larger one is cut and the connection dropped);
- redirects are not followed (``Answer.status`` is the 3xx, ``location`` where it pointed).

The connection is kept open between exchanges (HTTP/1.1 keep-alive) and opened again after any failure.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

MAX_ANSWER_BYTES = 64 * 1024
Signer = Callable[[str, bytes, dict[str, str]], dict[str, str]]  # (url, body, headers) -> headers to add


class EndpointError(ValueError):
    """The endpoint URL cannot be used."""


@dataclass
class Answer:
    status: int = 0  # 0: no HTTP answer (see error)
    body: bytes = b""
    content_type: str = ""
    retry_after: str = ""
    location: str = ""
    error: str = ""  # what went wrong before an answer came ("" when one came)
    timed_out: bool = False
    truncated: bool = False  # the body was longer than MAX_ANSWER_BYTES (cut)
    sent: bool = field(default=False)  # the request was written whole before the failure


@dataclass(frozen=True)
class Endpoint:
    url: str
    scheme: str
    host: str
    port: int
    target: str  # path and query
    host_header: str

    @staticmethod
    def parse(url: str) -> Endpoint:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise EndpointError(f"endpoint {url!r}: the scheme must be http or https")
        if not parts.hostname:
            raise EndpointError(f"endpoint {url!r} has no host")
        if parts.username or parts.password:
            raise EndpointError("the endpoint must not carry credentials in its URL; use --header")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise EndpointError(f"endpoint {url!r}: bad port") from None
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        default = (parts.scheme, port) in (("http", 80), ("https", 443))
        return Endpoint(url, parts.scheme, host, port, target, shown if default else f"{shown}:{port}")


class Transport:
    """Posts request bodies to one endpoint (see the module docstring)."""

    def __init__(
        self,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        timeout: float,
        context: ssl.SSLContext | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.headers = dict(headers)
        self.timeout = timeout
        self.context = context
        self.signer = signer
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._expired = False
        self._closed = False

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            ep = self.endpoint
            if ep.scheme == "https":
                self._conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=self.timeout, context=self.context)
            else:
                self._conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self.timeout)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    def _cut(self) -> None:
        """The watchdog (and ``abort``): shut the socket down so that a blocked read or write returns now."""
        with self._lock:
            self._expired = True
            conn = self._conn
            sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def abort(self) -> None:
        """Stop the exchange in progress (if any) and refuse new ones: the process is stopping."""
        self._closed = True
        self._cut()

    def post(self, body: bytes, headers: Mapping[str, str]) -> Answer:
        if self._closed:
            return Answer(error="stopping")
        all_headers = {**self.headers, **headers, "Host": self.endpoint.host_header}
        if self.signer is not None:
            try:
                all_headers.update(self.signer(self.endpoint.url, body, all_headers))
            except Exception as e:  # credentials that cannot be loaded or refreshed: retried later
                return Answer(error=f"cannot sign the request: {type(e).__name__}: {e}")
        self._expired = False
        deadline = time.monotonic() + self.timeout
        watchdog = threading.Timer(self.timeout, self._cut)
        watchdog.daemon = True
        watchdog.start()
        answer = Answer()
        try:
            conn = self._connection()
            conn.timeout = self.timeout
            conn.request("POST", self.endpoint.target, body=body, headers=all_headers)
            answer.sent = True
            response = conn.getresponse()
            answer.status = response.status
            answer.content_type = response.getheader("Content-Type", "") or ""
            answer.retry_after = response.getheader("Retry-After", "") or ""
            answer.location = response.getheader("Location", "") or ""
            data = response.read(MAX_ANSWER_BYTES + 1)
            if len(data) > MAX_ANSWER_BYTES:
                answer.truncated = True
                data = data[:MAX_ANSWER_BYTES]
                self._drop()  # the rest is not read: this connection cannot carry another request
            elif not response.isclosed():
                rest = response.read(1)  # a body that claimed to end but did not: do not reuse the connection
                if rest:
                    self._drop()
            answer.body = data
            if response.will_close:
                self._drop()
        except (OSError, http.client.HTTPException, ValueError) as e:
            self._drop()
            answer.timed_out = self._expired or isinstance(e, (TimeoutError, socket.timeout))
            answer.error = describe(e, self.timeout if answer.timed_out else None)
            if answer.status and answer.timed_out:
                answer.error = f"answer {answer.status} not read whole: {answer.error}"
                answer.status = 0
        finally:
            watchdog.cancel()
            if time.monotonic() > deadline and not answer.error and not self._closed:
                answer.timed_out = True
        return answer

    def close(self) -> None:
        self._drop()


def describe(e: BaseException, timeout: float | None) -> str:
    """A one-line description of a failed exchange."""
    if timeout is not None:
        return f"no answer within {timeout:g} s"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted: {e.verify_message or e.reason}"
    if isinstance(e, ssl.SSLError):
        return f"TLS error: {e.reason or e}"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, http.client.RemoteDisconnected):
        return "the receiver closed the connection without answering"
    if isinstance(e, http.client.HTTPException):
        return f"not an HTTP answer ({type(e).__name__})"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host: {e.strerror or e}"
    if isinstance(e, OSError):
        return f"{type(e).__name__}: {e.strerror or e}"
    return f"{type(e).__name__}: {e}"
