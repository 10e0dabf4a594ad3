"""Run the daemon as a real subprocess and read its report lines with timeouts.

The timeouts are deadlines for a loaded CI machine (interpreter start-up alone has taken over 30 s there), not
expectations of speed."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

from tests.conftest import REPO, daemon_cmd


class DaemonProcess:
    def __init__(self, *args: str, read: bool = True) -> None:
        self.proc = subprocess.Popen(
            daemon_cmd(*args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        if read:
            threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def report(self, timeout: float = 90.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        while line is not None and not line.strip():  # the resync newline before the first report
            line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError(self.stderr())
        assert line.endswith(b"\n")
        return json.loads(line)

    def reports(self, n: int, timeout: float = 90.0) -> list[dict[str, Any]]:
        return [self.report(timeout) for _ in range(n)]

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "(still running)"
        return self.proc.stderr.read().decode()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
