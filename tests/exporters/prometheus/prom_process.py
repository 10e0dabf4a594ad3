"""The exporter as a real process on a loopback port, fed through its stdin; and a TLS certificate maker."""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson


def exporter_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "neuron_monitor.exporters.prometheus.cli", *args]


class ExporterProcess:
    """``neuron-monitor-prometheus --bind 127.0.0.1 --port 0 ...`` with a pipe on stdin."""

    def __init__(self, *args: str, stdin: Any = subprocess.PIPE) -> None:
        self.proc = subprocess.Popen(
            exporter_cmd("--bind", "127.0.0.1", "--port", "0", *args),
            stdin=stdin,
            stderr=subprocess.PIPE,
            text=False,
        )
        self.log: list[str] = []
        self.port = 0
        deadline = time.monotonic() + 20
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode()
            if not line:
                raise RuntimeError(f"exporter exited: {self.log}")
            self.log.append(line)
            m = re.search(r"server at \S+ port (\d+)", line)
            if m:
                self.port = int(m.group(1))
                return
        raise RuntimeError("exporter did not start")

    def send(self, *lines: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        for line in lines:
            data = orjson.dumps(line) if isinstance(line, dict) else line
            self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def get(
        self, path: str, tls: ssl.SSLContext | None = None, auth: tuple[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        conn: http.client.HTTPConnection
        if tls is not None:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=tls, timeout=10)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read().decode()
        finally:
            conn.close()

    def wait_for(self, path: str, predicate: Any, timeout: float = 10.0, **kw: Any) -> str:
        deadline = time.monotonic() + timeout
        body = ""
        while time.monotonic() < deadline:
            status, _, body = self.get(path, **kw)
            if predicate(status, body):
                return body
            time.sleep(0.05)
        raise AssertionError(f"{path} never satisfied the condition; last body: {body[:500]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(10)
        finally:
            for f in (self.proc.stdin, self.proc.stderr):
                if f is not None:
                    f.close()


def make_certificate(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1/localhost, made with the openssl command line."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def client_context(cert: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cert))
    return ctx
