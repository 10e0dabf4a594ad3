"""One HTTP exchange within one total deadline: connect, send, headers and body, whatever the peer does.

A socket timeout bounds each read, not the exchange: a server that sends one byte every half second keeps a
client with a 3 s timeout busy for as long as it likes (issue 39: ``neuron-monitor-health --timeout 3`` ran 50 s).
``exchange`` gives the whole exchange ``seconds``: every blocking step gets the time that is left as its socket
timeout, and a timer shuts the socket down when the deadline passes, which ends whatever read, write or TLS
handshake is in progress. Every HTTP client of the project goes through it: ``neuron-monitor-health --url``, the
Kubernetes API server client (``k8s/kubeapi.py``), instance metadata (``host/imds.py``) and the CloudWatch
exporter's requests (``exporters/cloudwatch/transport.py``). The kubelet's gRPC calls use gRPC's own deadline,
which is a total already.

Errors: ``DeadlineExceeded`` (no complete answer in time; ``sent`` says whether the request had been sent),
``BodyTooLarge`` (more than ``max_bytes``); anything else is the ``OSError`` or ``http.client.HTTPException`` of
the step that failed, with ``sent_request`` set on it (whether the request had gone out: a caller that must
never send twice tells "not sent" from "no answer" by it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by the first exchange: a daemon that asks nothing over HTTP never imports it
    import http.client
    from email.message import Message

READ_CHUNK = 64 * 1024


class DeadlineExceeded(TimeoutError):
    """No complete answer within the deadline."""

    def __init__(self, seconds: float, sent: bool) -> None:
        super().__init__(f"no complete answer within {seconds:g} s")
        self.seconds = seconds
        self.sent = sent


class BodyTooLarge(ValueError):
    """The answer's body is longer than allowed."""

    def __init__(self, limit: int, length: int | None = None) -> None:
        what = f"answer of {length} bytes" if length is not None else "answer"
        super().__init__(f"{what} exceeds the {limit}-byte cap")
        self.limit = limit


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: Message
    body: bytes


class Deadline:
    """A point in time (monotonic) and the budget it came from."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0


def _shut(conn: http.client.HTTPConnection, fired: threading.Event) -> None:
    """The deadline passed: unblock whatever the exchange is doing on the socket."""
    fired.set()
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def exchange(
    conn: http.client.HTTPConnection,
    method: str,
    target: str,
    headers: dict[str, str],
    seconds: float | Deadline,
    max_bytes: int,
    body: bytes | None = None,
) -> Answer:
    """Send one request on ``conn`` (not yet connected) and read the whole answer, all within ``seconds`` (or
    by an existing ``Deadline``, shared by several exchanges). ``conn`` is closed on return."""
    import http.client

    deadline = seconds if isinstance(seconds, Deadline) else Deadline(seconds)
    sent = False
    left = deadline.left()
    if left <= 0:
        conn.close()
        raise DeadlineExceeded(deadline.seconds, sent)
    conn.timeout = left  # the connect step's timeout (the timer below cannot reach a socket not yet made)
    fired = threading.Event()  # the timer's wait may end a hair before the monotonic clock reaches the deadline
    timer = threading.Timer(left, _shut, (conn, fired))
    timer.daemon = True
    timer.start()
    try:
        conn.request(method, target, body=body, headers=headers)
        sent = True
        _left_on_socket(conn, deadline, sent)
        resp = conn.getresponse()
        length = resp.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise BodyTooLarge(max_bytes, int(length))
        chunks: list[bytes] = []
        size = 0
        while True:
            _left_on_socket(conn, deadline, sent)
            chunk = resp.read1(READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise BodyTooLarge(max_bytes)
            chunks.append(chunk)
        if fired.is_set():  # the end of the body may be the timer's shutdown, not the server's
            raise DeadlineExceeded(deadline.seconds, sent)
        if resp.length:  # http.client's read1 ends a Content-Length body short without a word
            raise http.client.IncompleteRead(b"".join(chunks), resp.length)
        return Answer(resp.status, resp.reason, resp.headers, b"".join(chunks))
    except (OSError, http.client.HTTPException) as e:
        if (fired.is_set() or deadline.passed()) and not isinstance(e, DeadlineExceeded):
            raise DeadlineExceeded(deadline.seconds, sent) from None
        setattr(e, "sent_request", sent)  # noqa: B010  (an attribute the exception types do not declare)
        raise
    finally:
        timer.cancel()
        conn.close()


def _left_on_socket(conn: http.client.HTTPConnection, deadline: Deadline, sent: bool) -> None:
    """Give the next blocking step on ``conn``'s socket only the time that is left (none: DeadlineExceeded)."""
    left = deadline.left()
    if left <= 0:
        raise DeadlineExceeded(deadline.seconds, sent)
    if conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.settimeout(left)
