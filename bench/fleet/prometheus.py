"""The fleet's Prometheus pair, both Debian's ``prometheus`` binary on loopback ports in temporary directories: an
agent (``--enable-feature=agent``: scrape and remote-write, no TSDB, no rules) that scrapes every node, and a
central server (``--web.enable-remote-write-receiver``) that stores what the agent sends and evaluates the rules.
This is the path fleets run: a Prometheus agent per cluster into Amazon Managed Prometheus, Mimir or Thanos.

Each process is killed when the process that started it dies (``PR_SET_PDEATHSIG`` with SIGKILL: an agent given
SIGTERM waits for its remote-write queue, and the central may be gone), so neither outlives a killed harness or
test; ``stop`` ends them with SIGTERM first.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class PromProcess:
    """One ``prometheus`` process on a free loopback port; ``ready`` waits for /-/ready."""

    def __init__(self, name: str, workdir: Path, config: str, flags: list[str]) -> None:
        self.name = name
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "prometheus.yml"
        self.config.write_text(config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(self.dir / "log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn", *flags],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )  # fmt: skip

    def ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready within {timeout} s")

    def log_text(self) -> str:
        return (self.dir / "log").read_text(errors="replace")

    def get(self, path: str, **params: str) -> Any:
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=30) as r:
            answer = json.loads(r.read())
        if answer.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {answer}")
        return answer["data"]

    def self_metrics(self) -> dict[str, float]:
        """The process's own /metrics, unlabelled or summed over labels, by sample name."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            name = name_labels.split("{", 1)[0]
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                continue
        return out

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self) -> float:
        rest = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Central(PromProcess):
    """The central Prometheus: receives remote write, evaluates ``rule_files`` every ``evaluation_interval``."""

    def __init__(self, workdir: Path, rule_files: list[Path], evaluation_interval: str = "15s") -> None:
        rules = "".join(f"  - {json.dumps(str(p))}\n" for p in rule_files)
        config = f"global:\n  evaluation_interval: {evaluation_interval}\n" + (f"rule_files:\n{rules}" if rules else "")
        super().__init__(
            "central",
            workdir,
            config,
            ["--web.enable-remote-write-receiver", f"--storage.tsdb.path={workdir / 'central' / 'tsdb'}"],
        )

    @property
    def write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/query", query=expr)["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/alerts")["alerts"])

    def rules(self) -> list[dict[str, Any]]:
        return [r for g in self.get("/api/v1/rules")["groups"] for r in g["rules"]]


def agent_config(targets: dict[str, list[str]], write_url: str, scrape_interval: str, job: str) -> str:
    """Scrape every target (labelled with its node group) and remote-write everything to ``write_url``."""
    groups = [{"targets": t, "labels": {"node_group": g}} for g, t in sorted(targets.items())]
    return (
        "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  scrape_timeout: {scrape_interval}\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        f"    static_configs: {json.dumps(groups)}\n"
        "remote_write:\n"
        f"  - url: {json.dumps(write_url)}\n"
        "    queue_config:\n"
        "      batch_send_deadline: 1s\n"
        "      max_samples_per_send: 2000\n"
    )


class Agent(PromProcess):
    def __init__(
        self, workdir: Path, targets: dict[str, list[str]], write_url: str, scrape_interval: str = "15s",
        job: str = "neuron-monitor",
    ) -> None:  # fmt: skip
        super().__init__(
            "agent",
            workdir,
            agent_config(targets, write_url, scrape_interval, job),
            [
                "--enable-feature=agent",
                f"--storage.agent.path={workdir / 'agent' / 'wal'}",
                "--storage.remote.flush-deadline=5s",  # a stopped agent waits at most this for its queue
            ],
        )
