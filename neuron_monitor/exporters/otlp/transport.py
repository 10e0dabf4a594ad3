"""One HTTP exchange with the receiver, bounded in time and memory whatever the receiver does.

``Transport.post`` sends one request through the project's ``util.deadline.exchange`` and returns an ``Answer``;
it never raises. Bounds:

- a total deadline per exchange (``timeout``: connect, TLS handshake, sending, the status line, the headers and
  the answer's body together): each socket step gets the time that is left and a timer shuts the socket down when
  the deadline passes, so a receiver that trickles one byte at a time or never answers cannot hold the sender;
- at most ``MAX_ANSWER_BYTES`` of an answer's body: a longer answer ends the exchange (``Answer.too_large``; the
  request reached the receiver, its status is unknown);
- redirects are not followed (``Answer.status`` is the 3xx, ``location`` where it pointed).

Each exchange has its own connection (one request per report, seconds apart); ``abort`` cuts the one in progress.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from neuron_monitor.util.deadline import BodyTooLarge, DeadlineExceeded, exchange
from neuron_monitor.util.sanitize import url_shown

MAX_ANSWER_BYTES = 64 * 1024
Signer = Callable[[str, bytes, dict[str, str]], dict[str, str]]  # (url, body, headers) -> headers to add


def _without_query(url: str) -> str:
    """``url`` for an error line: a query (which may carry a key) is not shown."""
    head, question, _ = url.partition("?")
    return head + ("?[query not shown]" if question else "")


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
    too_large: bool = False  # the answer's body passed MAX_ANSWER_BYTES: sent, status unknown
    sent: bool = field(default=False)  # the request was written whole before the failure


@dataclass(frozen=True)
class Endpoint:
    url: str
    scheme: str
    host: str
    port: int
    target: str  # path and query
    host_header: str

    @property
    def shown(self) -> str:
        """The URL for a log line: scheme, host, port and path; a query (which may carry a key) is not shown."""
        path, query, _ = self.target.partition("?")
        return f"{self.scheme}://{self.host_header}{path}" + ("?[query not shown]" if query else "")

    @staticmethod
    def parse(url: str) -> Endpoint:
        parts = urllib.parse.urlsplit(url)
        if url_shown(url) != url:  # first: no other message may show them
            raise EndpointError("the endpoint must not carry credentials in its URL; use --header")
        if bad := next((c for c in url if c <= " " or c >= "\x7f"), None):
            raise EndpointError(
                f"endpoint {_without_query(url)!r}: a space, control or non-ASCII character (U+{ord(bad):04X})"
                " cannot be sent; percent-encode it"
            )
        if parts.scheme not in ("http", "https"):
            raise EndpointError(f"endpoint {_without_query(url)!r}: the scheme must be http or https")
        if not parts.hostname:
            raise EndpointError(f"endpoint {_without_query(url)!r} has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise EndpointError(f"endpoint {_without_query(url)!r}: bad port") from None
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
        self._closed = False

    def _connection(self) -> http.client.HTTPConnection:
        ep = self.endpoint
        if ep.scheme == "https":
            return http.client.HTTPSConnection(ep.host, ep.port, timeout=self.timeout, context=self.context)
        return http.client.HTTPConnection(ep.host, ep.port, timeout=self.timeout)

    def abort(self) -> None:
        """Stop the exchange in progress (if any) and refuse new ones: the process is stopping."""
        self._closed = True
        with self._lock:
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def post(self, body: bytes, headers: Mapping[str, str]) -> Answer:
        if self._closed:
            return Answer(error="stopping")
        all_headers = {**self.headers, **headers, "Host": self.endpoint.host_header}
        if self.signer is not None:
            try:
                all_headers.update(self.signer(self.endpoint.url, body, all_headers))
            except Exception as e:  # credentials that cannot be loaded or refreshed: retried later
                return Answer(error=f"cannot sign the request: {type(e).__name__}: {e}")
        conn = self._connection()
        with self._lock:
            self._conn = conn
        try:
            got = exchange(conn, "POST", self.endpoint.target, all_headers, self.timeout, MAX_ANSWER_BYTES, body)
        except DeadlineExceeded as e:
            return Answer(error=f"no answer within {self.timeout:g} s", timed_out=True, sent=e.sent)
        except BodyTooLarge:
            return Answer(error=f"an answer longer than {MAX_ANSWER_BYTES} bytes", too_large=True, sent=True)
        except (OSError, http.client.HTTPException, ValueError) as e:
            return Answer(error=describe(e), sent=bool(getattr(e, "sent_request", False)))
        finally:
            with self._lock:
                self._conn = None
        return Answer(
            status=got.status,
            body=got.body,
            content_type=got.headers.get("Content-Type", "") or "",
            retry_after=got.headers.get("Retry-After", "") or "",
            location=got.headers.get("Location", "") or "",
        )


def describe(e: BaseException) -> str:
    """A one-line description of a failed exchange."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted: {e.verify_message or e.reason}"
    if isinstance(e, ssl.SSLError):
        return f"TLS error: {e.reason or e}"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, http.client.RemoteDisconnected):
        return "the receiver closed the connection without answering"
    if isinstance(e, http.client.BadStatusLine) and str(e.args[0] if e.args else "").startswith("\x00\x00"):
        return "an HTTP/2-only answer: an OTLP/gRPC port (4317)? OTLP/HTTP is usually on 4318"
    if isinstance(e, http.client.HTTPException):
        return f"not an HTTP answer ({type(e).__name__})"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host: {e.strerror or e}"
    if isinstance(e, OSError):
        return f"{type(e).__name__}: {e.strerror or e}"
    return f"{type(e).__name__}: {e}"
