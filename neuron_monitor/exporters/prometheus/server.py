"""The HTTP front: one asyncio event loop serves every connection; nothing a client does can stall the others.

Design (issue 15's lean path and issue 20's hostile front are one):

- **One event-loop thread** (``HTTPFront``) runs every connection as a small ``asyncio.Protocol``: no thread per
  client. The listen backlog is ``backlog`` (1024; the kernel caps it at ``net.core.somaxconn``). ``run`` serves
  on the calling thread (the exporter's main thread, whose loop also reads stdin: ``ingest``); ``start`` on a
  thread of its own.
- **Deadlines.** A request's head (request line and headers, at most ``max_header_bytes``) must arrive completely
  within ``header_timeout`` seconds of its first byte, and a keep-alive connection may idle ``idle_timeout``
  seconds between requests; a TLS handshake gets ``header_timeout`` too. A slow (slowloris) client is dropped
  when its deadline passes, before anything is parsed or rendered. A response that the client has not read
  whole within ``write_timeout`` seconds of its start is dropped too (a total, as Go's ``http.Server``
  ``WriteTimeout`` that promhttp runs under), and counted by why (``closed``: ``write_timeout``,
  ``header_timeout``, ``idle_timeout``, ``evicted``, ``refused``).
- **Bounded unsent bytes.** A response is written in chunks of at most ``CHUNK_BYTES``, taken from its body only
  while the transport's buffer is below ``WRITE_BUFFER_BYTES``; a body is shared bytes (the kept report text) or
  a ``BodyStream`` that makes its bytes on demand. A client that never reads so pins at most about
  ``WRITE_BUFFER_BYTES + CHUNK_BYTES`` of its own, however large the body (issue 39: 200 such clients of a
  46 MB text held 8.8 GB before).
- **Bounded connections.** At most ``max_connections`` are open; a new one beyond that evicts the oldest
  connection that is not sending a response (or, when every one is, the one whose response started first), so
  idle, dripping or never-reading sockets cannot lock scrapers out.
- **Bounded work.** Handlers run on the loop thread and are cheap (``collector`` renders once per report); the
  only blocking work, bcrypt, runs on a pool of ``auth.max_concurrent`` threads with at most
  ``max_auth_pending`` requests waiting (more get ``503`` at once). Pipelined requests are answered in order;
  reading pauses while a response is pending, so a client cannot queue unbounded work.
- **HTTP/1.1** with keep-alive (HTTP/1.0 with ``Connection: keep-alive``), ``HEAD`` (the headers a ``GET``
  would get, no body), ``405`` for other methods, ``400`` for a malformed head, ``431`` for a head too large.
  Request bodies are not read: a request announcing one is answered and the connection closed.
- **TLS** through ``tls.ReloadingTLS``: certificates and keys are re-read when their files change, checked every
  ``tls.check_interval`` seconds on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import math
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from neuron_monitor.exporters.prometheus.tls import ReloadingTLS

log = logging.getLogger("neuron_monitor.exporters.prometheus.server")

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


CHUNK_BYTES = 64 * 1024  # a response is handed to the transport at most this much at a time
WRITE_BUFFER_BYTES = 64 * 1024  # more is taken from the body only while the transport holds less than this
# why the server closes a connection (counted in ``HTTPFront.closes``, served as a self-metric)
CLOSE_REASONS = ("write_timeout", "header_timeout", "idle_timeout", "evicted", "refused")
DEADLINE_SLACK = 0.001  # seconds: a deadline this close when its timer fires counts as passed


@dataclass(frozen=True)
class ServerLimits:
    backlog: int = 1024
    max_connections: int = 512
    header_timeout: float = 10.0
    idle_timeout: float = 60.0
    write_timeout: float = 30.0
    max_header_bytes: int = 16384
    max_auth_pending: int = 64


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its first value

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class BodyStream(Protocol):
    """A response body made on demand: ``length`` bytes in all, ``read(limit)`` gives the next at most
    ``limit`` of them (``b""`` once they are all given)."""

    length: int

    def read(self, limit: int) -> bytes | memoryview: ...


class PartsBody:
    """A body of parts (shared bytes, never copied here) given out in slices of at most ``limit`` bytes."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = [p for p in parts if p]
        self.length = sum(map(len, self.parts))
        self._at = 0  # the part being given out
        self._offset = 0  # bytes of it already given

    def read(self, limit: int) -> bytes | memoryview:
        if self._at >= len(self.parts):
            return b""
        part = self.parts[self._at]
        start = self._offset
        if start == 0 and len(part) <= limit:
            self.parts[self._at] = b""
            self._at += 1
            return part
        end = min(start + limit, len(part))
        chunk = memoryview(part)[start:end]
        if end == len(part):
            self.parts[self._at] = b""  # let the part go (the transport holds what it did not send)
            self._at, self._offset = self._at + 1, 0
        else:
            self._offset = end
        return chunk  # a slice, not a copy: the transport copies only what the socket did not take


def read_all(body: bytes | list[bytes] | BodyStream) -> bytes:
    """A body as one ``bytes`` (tests, and callers that want it whole)."""
    if isinstance(body, bytes):
        return body
    stream = PartsBody(body) if isinstance(body, list) else body
    out = []
    while chunk := stream.read(CHUNK_BYTES):
        out.append(bytes(chunk))
    return b"".join(out)


@dataclass
class Response:
    status: int
    body: bytes | list[bytes] | BodyStream = b""  # a list: shared parts written one after the other
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False


Handler = Callable[[Request], "Response | Coroutine[Any, Any, Response]"]


def plain(status: int, text: str, **headers: str) -> Response:
    return Response(status, (text + "\n").encode(), headers=dict(headers))


def parse_head(head: bytes) -> Request | Response:
    """A request head (without the final blank line) as a ``Request``, or the error ``Response`` to send."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return plain(400, "Bad Request")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        return plain(400, "Bad Request")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        return plain(505, "HTTP Version Not Supported") if version.startswith("HTTP/") else plain(400, "Bad Request")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return plain(400, "Bad Request")
        key, value = name.lower(), value.strip()
        if key in _FRAMING:
            framed = _framing_value(key, value, headers.get(key))
            if framed is None:
                return plain(400, "Bad Request")
            value = framed
        headers.setdefault(key, value)
    return Request(method, target, version, headers)


def response_head(
    status: int,
    content_type: str,
    length: int,
    server_name: str,
    headers: dict[str, str],
    keep_alive: bool,
    http10: bool,
) -> bytes:
    """A response's head: status line, Content-Type, Content-Length, Server, ``headers`` (the front's extra
    headers, then the response's), Connection when it is not HTTP/1.1's default (the plain twin of
    ``HeadCache.response``)."""
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {length}",
        f"Server: {server_name}",
    ]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    if not keep_alive:
        lines.append("Connection: close")
    elif http10:
        lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


HEAD_CACHE_ENTRIES = 64  # request heads and response heads kept each (all are dropped when more come)
HEAD_CACHE_BYTES = 2048  # request heads longer than this are parsed every time


class HeadCache:
    """Heads a keep-alive scraper repeats, kept per front (the fast twins of ``parse_head`` and
    ``response_head``): Prometheus sends the same request head bytes on every scrape and gets a response head
    that differs only in its Content-Length. ``request`` gives the ``Request`` parsed from the same bytes before
    (heads of at most ``HEAD_CACHE_BYTES`` that parse to a request without credentials; a ``Request`` is never
    changed by its users); ``response`` fills the length into the head made before for the same status, type,
    headers and connection. At most ``HEAD_CACHE_ENTRIES`` of each (emptied when full), so heads that vary cost
    a bounded amount."""

    def __init__(self, server_name: str, extra_headers: dict[str, str]) -> None:
        self.server_name = server_name
        self.extra_headers = extra_headers
        self._requests: dict[bytes, Request] = {}
        self._responses: dict[tuple[object, ...], tuple[str, str]] = {}

    def request(self, head: bytes) -> Request | Response:
        kept = self._requests.get(head)
        if kept is not None:
            return kept
        parsed = parse_head(head)
        if isinstance(parsed, Request) and len(head) <= HEAD_CACHE_BYTES and "authorization" not in parsed.headers:
            if len(self._requests) >= HEAD_CACHE_ENTRIES:
                self._requests.clear()
            self._requests[head] = parsed
        return parsed

    def response(self, response: Response, length: int, keep_alive: bool, http10: bool) -> bytes:
        headers = response.headers
        key = (response.status, response.content_type, tuple(headers.items()), keep_alive, http10)
        kept = self._responses.get(key)
        if kept is None:
            marker = response_head(
                response.status,
                response.content_type,
                0,
                self.server_name,
                {**self.extra_headers, **headers},
                keep_alive,
                http10,
            ).decode("latin-1")
            before, _, after = marker.partition("\r\nContent-Length: 0\r\n")
            kept = (before + "\r\nContent-Length: ", "\r\n" + after)
            if len(self._responses) >= HEAD_CACHE_ENTRIES:
                self._responses.clear()
            self._responses[key] = kept
        return (kept[0] + str(length) + kept[1]).encode("latin-1")


_FRAMING = ("content-length", "host")  # headers whose repetition with another value is a framing error


def _framing_value(key: str, value: str, first: str | None) -> str | None:
    """The value to keep of a framing header, or None for a malformed head (400). RFC 9112: a Content-Length is
    digits, a list of equal values counts as one, and every repeat carries the same value (section 6.3); a second
    Host field is refused whatever it says (section 3.2)."""
    if key == "host":
        return value if first is None else None
    values = {v.strip() for v in value.split(",")}
    (only,) = values if len(values) == 1 else ("",)
    if not (only.isdigit() and only.isascii()) or (first is not None and only != first):
        return None
    return only


def wants_keep_alive(request: Request) -> bool:
    tokens = {t.strip().lower() for t in request.headers.get("connection", "").split(",")}
    if request.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


class Connection(asyncio.Protocol):
    """One client connection (see the module docstring for its states and deadlines)."""

    def __init__(self, front: HTTPFront) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False  # a request is being answered (handler running or response not yet sent)
        self.writing_paused = False
        self.timer: asyncio.TimerHandle | None = None  # fires at or before ``deadline`` (see _arm)
        self.deadline = math.inf  # loop time at which this connection is dropped
        self.closed = False
        self.why = "idle_timeout"  # what passing ``deadline`` means (counted as the reason it was closed)
        self.responding_since = math.inf  # loop time at which the response being written started
        self._body: BodyStream | None = None  # what is left to write of the response
        self._keep_alive = False

    # --- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
        self.front.opened(self)
        self._arm(self.front.limits.idle_timeout, "idle_timeout")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        self._body = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.front.lost(self)

    def data_received(self, data: bytes) -> None:
        if not self.buffer and not self.busy:
            self._arm(self.front.limits.header_timeout, "header_timeout")  # runs from the head's first byte
        self.buffer += data
        if not self.busy:
            self._next_request()
        elif len(self.buffer) > self.front.limits.max_header_bytes and self.transport is not None:
            self.transport.pause_reading()  # pipelining: read on once the pending response is out

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self._body is not None:
            self._write_on()
        elif self.busy:
            self._sent()

    # --- deadlines
    # A request moves the deadline three times (head, response, idle). Rather than cancelling and scheduling a
    # timer each time, the connection keeps one timer that fires at or before its deadline: a later deadline
    # leaves the timer alone (when it fires it finds the deadline moved and waits on for it), and only an
    # earlier one replaces it. A keep-alive scraper's connection then schedules about one timer per
    # ``header_timeout`` instead of three per request.
    def _arm(self, seconds: float, why: str) -> None:
        self.why = why
        loop = self.front.loop
        self.deadline = deadline = loop.time() + seconds
        timer = self.timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self.timer = loop.call_at(deadline, self._expired)

    def _disarm(self) -> None:
        self.deadline = math.inf  # a pending timer finds nothing due

    def _expired(self) -> None:
        self.timer = None
        if self.closed or self.deadline == math.inf:
            return
        loop = self.front.loop
        if self.deadline > loop.time() + DEADLINE_SLACK:  # moved on since the timer was set
            self.timer = loop.call_at(self.deadline, self._expired)
            return
        self.front.closed(self.why)
        self.abort()

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    # --- requests
    def _next_request(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        limit = self.front.limits.max_header_bytes
        if end < 0:
            if len(self.buffer) > limit:
                self._respond(plain(431, "Request Header Fields Too Large"), keep_alive=False)
            return
        if end > limit:
            self._respond(plain(431, "Request Header Fields Too Large"), keep_alive=False)
            return
        head = bytes(self.buffer[:end])
        del self.buffer[: end + 4]
        parsed = self.front.heads.request(head.lstrip(b"\r\n"))
        if isinstance(parsed, Response):
            self._respond(parsed, keep_alive=False)
            return
        self.busy = True
        self._disarm()
        keep_alive = wants_keep_alive(parsed)
        if "content-length" in parsed.headers or "transfer-encoding" in parsed.headers:
            keep_alive = keep_alive and parsed.headers.get("content-length", "") in ("0", "")
            keep_alive = keep_alive and "transfer-encoding" not in parsed.headers
        if parsed.method not in ("GET", "HEAD"):
            self._respond(plain(405, "Method Not Allowed", Allow="GET, HEAD"), keep_alive, parsed)
            return
        try:
            result = self.front.handler(parsed)
        except Exception:
            log.exception("handler failed for %s", parsed.path)
            self._respond(plain(500, "Internal Server Error"), False, parsed)
            return
        if isinstance(result, Response):
            self._respond(result, keep_alive, parsed)
        else:
            task = self.front.loop.create_task(result)
            task.add_done_callback(lambda t: self._finished(t, keep_alive, parsed))

    def _finished(self, task: asyncio.Task[Response], keep_alive: bool, request: Request) -> None:
        if self.closed:
            return
        try:
            response = task.result()
        except Exception:
            log.exception("handler failed for %s", request.path)
            response = plain(500, "Internal Server Error")
            keep_alive = False
        self._respond(response, keep_alive, request)

    def _respond(self, response: Response, keep_alive: bool, request: Request | None = None) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        self.busy = True
        keep_alive = keep_alive and not response.close
        body = response.body
        stream = PartsBody([body] if isinstance(body, bytes) else body) if isinstance(body, (bytes, list)) else body
        length = stream.length
        head = self.front.heads.response(
            response, length, keep_alive, request is not None and request.version == "HTTP/1.0"
        )
        self.front.count(str(response.status))
        if (request is not None and request.method == "HEAD") or not length:
            transport.write(head)
            stream = PartsBody([])
        elif length <= CHUNK_BYTES:  # one write: every usual response but an uncompressed /metrics
            transport.write(b"".join([head, *iter(lambda: stream.read(CHUNK_BYTES), b"")]))
        else:
            transport.write(head)
        self.responding_since = self.front.loop.time()
        self._arm(self.front.limits.write_timeout, "write_timeout")  # the whole response, read or not
        self._body = stream
        self._keep_alive = keep_alive
        self._write_on()
        after = self.front.after_response
        if after is not None:
            try:
                after()  # work that rides on this turn of the loop, now that the response is on its way
            except Exception:
                log.exception("work after a response failed")

    def _write_on(self) -> None:
        """Hand the transport the body's next chunks while its buffer is below ``WRITE_BUFFER_BYTES``
        (``resume_writing`` calls this again): a client that does not read pins at most one chunk beyond it."""
        transport = self.transport
        body = self._body
        if transport is None or self.closed or body is None:
            return
        while not self.writing_paused:
            chunk = body.read(CHUNK_BYTES)
            if not chunk:
                break
            transport.write(chunk)
        else:
            return
        self._body = None
        self.responding_since = math.inf
        if not self._keep_alive:
            transport.close()  # after the buffer drains, or at the write deadline
            return
        if not self.writing_paused:
            self._sent()

    def _sent(self) -> None:
        """The response left the buffer: wait for the next request (or answer one already received)."""
        self.busy = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()
        if self.buffer:
            self._arm(self.front.limits.header_timeout, "header_timeout")
            self._next_request()
        else:
            self._arm(self.front.limits.idle_timeout, "idle_timeout")


class HTTPFront:
    """Binds at construction (so a busy port fails before anything starts); ``start`` runs the loop thread."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        tls: ReloadingTLS | None = None,
        limits: ServerLimits | None = None,
        server_name: str = "neuron-monitor-prometheus",
        extra_headers: dict[str, str] | None = None,
        auth_threads: int = 2,
    ) -> None:
        self.handler = handler
        self.tls = tls
        self.limits = limits or ServerLimits()
        self.server_name = server_name
        self.extra_headers = dict(extra_headers or {})
        self.heads = HeadCache(server_name, self.extra_headers)  # repeated request and response heads
        self.loop = asyncio.new_event_loop()
        self.auth_pool = concurrent.futures.ThreadPoolExecutor(auth_threads, thread_name_prefix="bcrypt")
        self.auth_pending = 0
        self.connections: dict[Connection, None] = {}  # insertion order: oldest first
        # called on the loop right after each response is written (cli.py: stdin's next small read, ingest.py)
        self.after_response: Callable[[], None] | None = None
        self.counts: dict[str, int] = {}  # responses by status, and auth_busy
        self.closes: dict[str, int] = dict.fromkeys(CLOSE_REASONS, 0)  # connections this server closed, by why
        self.sock = self._listen(address)
        self.server_address: tuple[str, int] = self.sock.getsockname()[:2]
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    def _listen(self, address: tuple[str, int]) -> socket.socket:
        """A listening socket on ``address``. ``::`` (every address) is one IPv6 socket that takes IPv4 as well;
        on a kernel without IPv6 (booted with ipv6.disable=1: no IPv6 socket at all) it is every IPv4 address."""
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            if host != "::" or e.errno != errno.EAFNOSUPPORT:
                raise
            log.warning("no IPv6 on this host (%s): listening on every IPv4 address (0.0.0.0) for '::'", e.strerror)
            family, host = socket.AF_INET, "0.0.0.0"
            sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((host, port))
            sock.listen(self.limits.backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def closed(self, why: str) -> None:
        """Count a connection this server closed, by why (``CLOSE_REASONS``)."""
        self.closes[why] = self.closes.get(why, 0) + 1

    # --- connection bookkeeping (loop thread)
    def opened(self, conn: Connection) -> None:
        self.connections[conn] = None
        if len(self.connections) > self.limits.max_connections:
            victim = next((old for old in self.connections if not old.busy and old is not conn), None)
            if victim is None:  # every other one is answering: drop the response that started first
                writing = [old for old in self.connections if old.responding_since < math.inf]
                victim = min(writing, key=lambda old: old.responding_since) if writing else None
            if victim is None:  # every other one waits on its handler (bcrypt): refuse the newcomer
                self.closed("refused")
                conn.abort()
                return
            self.closed("evicted")
            victim.abort()
            self.connections.pop(victim, None)

    def lost(self, conn: Connection) -> None:
        self.connections.pop(conn, None)

    # --- bcrypt off the loop, bounded
    async def run_auth(self, check: Callable[[], bool]) -> bool | None:
        """``check()`` on the bcrypt pool; None (answer 503) when too many checks are already waiting."""
        if self.auth_pending >= self.limits.max_auth_pending:
            self.count("auth_busy")
            return None
        self.auth_pending += 1
        try:
            return await self.loop.run_in_executor(self.auth_pool, check)
        finally:
            self.auth_pending -= 1

    # --- lifecycle
    def run(self, ready: Callable[[asyncio.AbstractEventLoop], None] | None = None) -> None:
        """Serve on the calling thread until ``stop_running`` (or an exception out of a callback, such as a
        signal handler's ``SystemExit``) ends the loop; ``ready(loop)`` runs once the listener is up."""
        asyncio.set_event_loop(self.loop)
        try:
            self._server = self.loop.run_until_complete(self._serve())
            if ready is not None:
                ready(self.loop)
            self.loop.run_forever()
        finally:
            self._close_all()

    def stop_running(self) -> None:
        """End ``run`` (call on the loop thread)."""
        self.loop.stop()

    def _close_all(self) -> None:
        self._close_connections()
        self._release()

    def _close_connections(self) -> None:
        """Stop listening and drop every connection (on the loop thread)."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.abort()

    def _release(self) -> None:
        self.auth_pool.shutdown(wait=False, cancel_futures=True)
        self.sock.close()

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self._server = self.loop.run_until_complete(self._serve())
            except BaseException as e:  # surfaced to start()'s caller
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="http", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    async def _serve(self) -> asyncio.Server:
        ssl_context = self.tls.context if self.tls else None
        server = await self.loop.create_server(
            lambda: Connection(self),
            sock=self.sock,
            ssl=ssl_context,
            backlog=self.limits.backlog,
            ssl_handshake_timeout=self.limits.header_timeout if ssl_context else None,
        )
        if self.tls is not None:
            self.loop.call_later(self.tls.check_interval, self._check_tls)
        return server

    def _check_tls(self) -> None:
        assert self.tls is not None
        try:
            self.tls.maybe_reload()
        finally:
            self.loop.call_later(self.tls.check_interval, self._check_tls)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop thread."""
        self.loop.call_soon_threadsafe(fn)

    def stop(self, timeout: float = 2.0) -> None:
        """Close the listener and every connection; returns within ``timeout`` seconds."""
        if self._thread is None:
            self.sock.close()
            return

        def shutdown() -> None:
            self._close_connections()
            self.loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self.loop.call_soon_threadsafe(shutdown)
        self._thread.join(timeout)
        self._release()
