"""A real Prometheus server (Debian's /usr/bin/prometheus) on a loopback port, and PromQL over its HTTP API."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        scrape_interval: str = "1s",
        job_name: str = "neuron",
        rule_files: tuple[Path, ...] = (),
    ) -> None:
        """Scrapes ``targets`` as job ``job_name``; ``rule_files`` are evaluated every ``scrape_interval``."""
        self.port = free_port()
        config = workdir / "prometheus.yml"
        rules = "".join(f"  - {json.dumps(str(p))}\n" for p in rule_files)
        config.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  scrape_timeout: {scrape_interval}\n"
            f"  evaluation_interval: {scrape_interval}\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + "scrape_configs:\n"
            f"  - job_name: {job_name}\n"
            "    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log = open(workdir / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.loads(r.read())
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, expr: str, predicate: Any, timeout: float = 20.0) -> float | None:
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.value(expr)
            if predicate(got):
                return got
            time.sleep(0.25)
        raise AssertionError(f"{expr}: last value {got}")

    def alerts(self) -> list[dict[str, Any]]:
        """The active (pending or firing) alerts, from /api/v1/alerts."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/alerts", timeout=10) as r:
            answer = json.loads(r.read())
        assert answer["status"] == "success", answer
        return list(answer["data"]["alerts"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
