"""A loopback server that answers every request one byte every ``every`` seconds, for ``lasts`` seconds in all.

``head=True`` trickles the status line and headers too; else they come at once and the body trickles (a
Content-Length far longer than what is sent). Each connection is served by its own thread until the trickle
ends or the client hangs up. ``connections`` counts the connections accepted.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class TrickleServer:
    def __init__(self, every: float = 0.5, lasts: float = 60.0, head: bool = False) -> None:
        self.every = every
        self.lasts = lasts
        self.head = head
        self.connections = 0
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(self.lasts)
            request = b""
            while b"\r\n\r\n" not in request:
                data = conn.recv(65536)
                if not data:
                    return
                request += data
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
            if not self.head:
                conn.sendall(head)
            end = time.monotonic() + self.lasts
            data = head if self.head else b"x" * 1000  # 500 s of bytes: the trickle ends first
            for byte in data:
                if self._stop.wait(self.every) or time.monotonic() > end:
                    return
                conn.sendall(bytes([byte]))

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    def __enter__(self) -> TrickleServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
