"""The HTTP front: one asyncio event loop serves every connection; nothing a client does can stall the others.

Design (issue 15's lean path and issue 20's hostile front are one):

- **One event-loop thread** (``HTTPFront``) runs every connection as a small ``asyncio.Protocol``: no thread per
  client. The listen backlog is ``backlog`` (1024; the kernel caps it at ``net.core.somaxconn``). ``run`` serves
  on the calling thread (the exporter's main thread, whose loop also reads stdin: ``ingest``); ``start`` on a
  thread of its own.
- **Deadlines.** A request's head (request line and headers, at most ``max_header_bytes``) must arrive completely
  within ``header_timeout`` seconds of its first byte, and a keep-alive connection may idle ``idle_timeout``
  seconds between requests; a TLS handshake gets ``header_timeout`` too. A slow (slowloris) client is dropped
  when its deadline passes, before anything is parsed or rendered. A response that the client does not read
  within ``write_timeout`` seconds is dropped too.
- **Bounded connections.** At most ``max_connections`` are open; a new one beyond that evicts the oldest
  connection that is not sending a response, so idle or dripping sockets cannot lock scrapers out.
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
import logging
import math
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

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


JOIN_BYTES = 1024 * 1024  # a response body up to this long is written with its head in one write
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


@dataclass
class Response:
    status: int
    body: bytes | list[bytes] = b""  # a list: parts written one after the other (see ``Connection._respond``)
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
        self._unsent: list[bytes] = []  # the parts of a large response not yet written (see ``_write_on``)
        self._unsent_at = 0
        self._keep_alive = False

    # --- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.front.opened(self)
        self._arm(self.front.limits.idle_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.front.lost(self)

    def data_received(self, data: bytes) -> None:
        if not self.buffer and not self.busy:
            self._arm(self.front.limits.header_timeout)  # the head's deadline runs from its first byte
        self.buffer += data
        if not self.busy:
            self._next_request()
        elif len(self.buffer) > self.front.limits.max_header_bytes and self.transport is not None:
            self.transport.pause_reading()  # pipelining: read on once the pending response is out

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self._unsent:
            self._write_on()
        elif self.busy:
            self._sent()

    # --- deadlines
    # A request moves the deadline three times (head, response, idle). Rather than cancelling and scheduling a
    # timer each time, the connection keeps one timer that fires at or before its deadline: a later deadline
    # leaves the timer alone (when it fires it finds the deadline moved and waits on for it), and only an
    # earlier one replaces it. A keep-alive scraper's connection then schedules about one timer per
    # ``header_timeout`` instead of three per request.
    def _arm(self, seconds: float) -> None:
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
        self.front.count("timeout")
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
        parsed = parse_head(head.lstrip(b"\r\n"))
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
        parts = [body] if isinstance(body, bytes) else body
        length = sum(map(len, parts))
        lines = [
            f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Unknown')}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {length}",
            f"Server: {self.front.server_name}",
        ]
        lines.extend(f"{k}: {v}" for k, v in {**self.front.extra_headers, **response.headers}.items())
        if not keep_alive:
            lines.append("Connection: close")
        elif request is not None and request.version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if (request is not None and request.method == "HEAD") or not length:
            parts = []
        if length <= JOIN_BYTES:
            transport.write(b"".join([head, *parts]))  # one write (a small body: every usual response)
            parts = []
        else:
            transport.write(head)
        self.front.count(str(response.status))
        self._arm(self.front.limits.write_timeout)  # a client that does not read its response is dropped
        self._unsent = list(parts)  # emptied as written; the caller's list stays as it was
        self._unsent_at = 0
        self._keep_alive = keep_alive
        self._write_on()

    def _write_on(self) -> None:
        """Write the response's remaining parts while the transport takes them (``resume_writing`` calls this
        again): a large body is never copied into the transport's buffer whole."""
        transport = self.transport
        if transport is None or self.closed:
            return
        parts = self._unsent
        while self._unsent_at < len(parts):
            if self.writing_paused:
                return
            transport.write(parts[self._unsent_at])
            parts[self._unsent_at] = b""  # let the written part go (the transport holds what it did not send)
            self._unsent_at += 1
        self._unsent = []
        self._unsent_at = 0
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
            self._arm(self.front.limits.header_timeout)
            self._next_request()
        else:
            self._arm(self.front.limits.idle_timeout)


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
        self.loop = asyncio.new_event_loop()
        self.auth_pool = concurrent.futures.ThreadPoolExecutor(auth_threads, thread_name_prefix="bcrypt")
        self.auth_pending = 0
        self.connections: dict[Connection, None] = {}  # insertion order: oldest first
        self.counts: dict[str, int] = {}
        self.sock = self._listen(address)
        self.server_address: tuple[str, int] = self.sock.getsockname()[:2]
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    def _listen(self, address: tuple[str, int]) -> socket.socket:
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
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

    # --- connection bookkeeping (loop thread)
    def opened(self, conn: Connection) -> None:
        self.connections[conn] = None
        if len(self.connections) > self.limits.max_connections:
            for old in self.connections:
                if not old.busy:
                    self.count("evicted")
                    old.abort()
                    self.connections.pop(old, None)
                    break
            else:  # every connection is sending a response: refuse the newcomer
                self.count("refused")
                conn.abort()

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
