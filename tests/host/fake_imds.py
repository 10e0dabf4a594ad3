"""A local fake EC2 instance metadata service implementing the IMDSv2 token flow (and an IMDSv1-only mode)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

METADATA = {
    "instance-id": "i-0123456789abcdef0",
    "instance-type": "trn1.32xlarge",
    "placement/availability-zone": "us-west-2d",
    "placement/availability-zone-id": "usw2-az4",
    "placement/region": "us-west-2",
    "ami-id": "ami-0fedcba9876543210",
    "mac": "0a:1b:2c:3d:4e:5f",
    "network/interfaces/macs/0a:1b:2c:3d:4e:5f/subnet-id": "subnet-0abc1234",
    "tags/instance/Name": "trainer-17",
}


class FakeImds:
    """mode: "v2" (token required), "v1" (token endpoint 403, plain GETs), "hang" (never answers)."""

    def __init__(self, mode: str = "v2", metadata: dict[str, str] | None = None, expire_first_token: bool = False):
        self.mode = mode
        self.metadata = dict(METADATA if metadata is None else metadata)
        self.tokens: set[str] = set()
        self.issued = 0
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.expire_first_token = expire_first_token
        self.released = threading.Event()  # "hang" mode answers nothing until this is set (on exit)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                fake.requests.append(("PUT", self.path, dict(self.headers)))
                if fake.mode == "hang":
                    fake.released.wait(60)
                    return
                if fake.mode == "v1" or self.path != "/latest/api/token":
                    self._send(403)
                    return
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._send(400)
                    return
                token = f"tok{fake.issued}"
                fake.issued += 1
                fake.tokens.add(token)
                self._send(200, token)

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, dict(self.headers)))
                if fake.mode == "hang":
                    fake.released.wait(60)
                    return
                if fake.mode == "v2":
                    token = self.headers.get("X-aws-ec2-metadata-token")
                    if token not in fake.tokens:
                        self._send(401)
                        return
                    if fake.expire_first_token and token == "tok0":
                        fake.tokens.discard(token)
                        self._send(401)
                        return
                prefix = "/latest/meta-data/"
                key = self.path[len(prefix) :] if self.path.startswith(prefix) else None
                if key in fake.metadata:
                    self._send(200, fake.metadata[key])
                else:
                    self._send(404, "Not Found")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeImds:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
