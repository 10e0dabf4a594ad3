"""Process-level comparisons for ``bench_prometheus.py``: exporters as real processes, scraped at a fixed rate.

CPU is read from /proc (each process's threads' schedstat run time) over the same window for every process, and
the processes under comparison run at the same time, so a shared machine's drift hits both sides alike.

- ``vs_node_exporter``: Debian's ``prometheus-node-exporter`` (cpu and meminfo collectors only) against our
  daemon (vcpu_usage + memory_info every 0.1 s) piped into our exporter, both scraped 10 times a second.
- ``vs_aws_style``: our exporter against ``aws_style_exporter.py`` (AWS's way: global client_python metrics
  updated per report, client_python's HTTP server), both fed the same trn2.48xlarge stream at 10 reports/s and
  scraped twice a second with gzip.
"""

from __future__ import annotations

import http.client
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.daemon_run import REPO, _cpu_s

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scraper:
    """GET /metrics every ``1/rate`` seconds on a keep-alive connection (as Prometheus does), with gzip."""

    port: int
    rate: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        due = time.monotonic()
        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                resp = conn.getresponse()
                resp.read()
                self.latencies.append(time.perf_counter() - t)
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            due += 1.0 / self.rate
            self._stop.wait(max(due - time.monotonic(), 0.0))
        conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def pct(self, p: float) -> float:
        values = sorted(self.latencies)
        return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))] if values else float("nan")


def get(port: int, path: str = "/metrics") -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def wait_for(port: int, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if needle in get(port):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"port {port} never served {needle!r}")


def start_ours(stdin: Any, tree: Path = REPO) -> tuple[subprocess.Popen[bytes], int]:
    """Our exporter from the checkout ``tree`` (``-m`` runs it from there: its package comes first on the path)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.exporters.prometheus.cli", "--bind", "127.0.0.1", "--port", "0"],
        cwd=tree,
        stdin=stdin,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    for _ in range(50):
        line = proc.stderr.readline().decode()
        m = re.search(r"port (\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
            return proc, int(m.group(1))
        if not line:
            break
    raise RuntimeError("our exporter did not start")


def start_aws_style(stdin: Any) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "aws_style_exporter.py"), "--port", str(port)],
        cwd=REPO,
        stdin=stdin,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def _window(pids: dict[str, int], scrapers: list[Scraper], seconds: float) -> dict[str, float]:
    """CPU seconds of each process over ``seconds`` while ``scrapers`` run."""
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    for s in scrapers:
        s.start()
    time.sleep(seconds)
    after = {name: _cpu_s(pid) for name, pid in pids.items()}
    for s in scrapers:
        s.stop()
    return {name: after[name] - before[name] for name in pids}


HOST_CONF = '{"period": "0.1s", "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}]}'


def _host_pipeline(tree: Path, conf: Path) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], int]:
    """``tree``'s daemon (vcpu_usage + memory_info at 0.1 s) piped into ``tree``'s exporter."""
    daemon = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf)],
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    exporter, port = start_ours(daemon.stdout, tree)
    return daemon, exporter, port


def _start_node_exporter() -> tuple[subprocess.Popen[bytes], int]:
    """node_exporter with only its cpu and meminfo collectors, on a free loopback port."""
    port = free_port()
    node = subprocess.Popen(
        [
            NODE_EXPORTER,
            "--collector.disable-defaults",
            "--collector.cpu",
            "--collector.meminfo",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return node, port


def vs_node_exporter(seconds: float = 20.0, rate: float = 10.0) -> dict[str, float]:
    """CPU of node_exporter vs our daemon + exporter serving host vCPU and memory, both scraped ``rate``/s."""
    node, node_port = _start_node_exporter()
    conf = Path(tempfile.mkdtemp()) / "host.conf"
    conf.write_text(HOST_CONF)
    daemon, exporter, port = _host_pipeline(REPO, conf)
    try:
        wait_for(node_port, "node_memory_MemTotal_bytes")
        wait_for(port, "system_memory_total_bytes")
        time.sleep(2.0)
        node_scraper, our_scraper = Scraper(node_port, rate), Scraper(port, rate)
        cpu = _window(
            {"node": node.pid, "daemon": daemon.pid, "exporter": exporter.pid}, [node_scraper, our_scraper], seconds
        )
    finally:
        stop(exporter, daemon, node)
    ours = cpu["daemon"] + cpu["exporter"]
    print(
        f"(a) host vCPU + memory, scraped {rate:g}/s for {seconds:g} s, both at once (CPU ms per second of wall time)"
    )
    print(f"    node_exporter (cpu, meminfo)          {cpu['node'] / seconds * 1e3:8.2f}")
    print(f"    neuron-monitor daemon at 0.1 s        {cpu['daemon'] / seconds * 1e3:8.2f}")
    print(f"    neuron-monitor-prometheus             {cpu['exporter'] / seconds * 1e3:8.2f}")
    print(f"    CPU ratio ours / node_exporter        {ours / cpu['node']:8.2f}   (target <= 0.5, issue 41)")
    print(f"    exporter alone / node_exporter        {cpu['exporter'] / cpu['node']:8.2f}")
    print(
        f"    scrape p50/p99 ms: node {node_scraper.pct(50) * 1e3:.2f}/{node_scraper.pct(99) * 1e3:.2f}, "
        f"ours {our_scraper.pct(50) * 1e3:.2f}/{our_scraper.pct(99) * 1e3:.2f}; "
        f"errors {node_scraper.errors}/{our_scraper.errors}"
    )
    return {"ratio": ours / cpu["node"], "exporter_ratio": cpu["exporter"] / cpu["node"]}


def ab_vs_node_exporter(
    tree: Path, seconds: float = 20.0, rate: float = 10.0, b_first: bool = False
) -> dict[str, float]:
    """One round of an A/B of ``vs_node_exporter``: node_exporter, this checkout's daemon + exporter (A) and
    ``tree``'s (B), all scraped ``rate``/s at the same time (B started first when ``b_first``); each one's CPU
    seconds and scrape p50/p99 (ms)."""
    node, node_port = _start_node_exporter()
    conf = Path(tempfile.mkdtemp()) / "host.conf"
    conf.write_text(HOST_CONF)
    order = [("b", tree), ("a", REPO)] if b_first else [("a", REPO), ("b", tree)]
    pipes = {side: _host_pipeline(where, conf) for side, where in order}
    try:
        wait_for(node_port, "node_memory_MemTotal_bytes")
        for _, _, port in pipes.values():
            wait_for(port, "system_memory_total_bytes")
        time.sleep(2.0)
        scrapers = {"node": Scraper(node_port, rate)} | {side: Scraper(pipes[side][2], rate) for side, _ in order}
        pids = {"node": node.pid} | {
            f"{side}_{part}": proc.pid
            for side, (daemon, exporter, _) in pipes.items()
            for part, proc in (("daemon", daemon), ("exporter", exporter))
        }
        cpu = _window(pids, list(scrapers.values()), seconds)
    finally:
        stop(*(p for daemon, exporter, _ in pipes.values() for p in (exporter, daemon)), node)
    out = dict(cpu)
    for name, scraper in scrapers.items():
        out[f"{name}_p50"], out[f"{name}_p99"] = scraper.pct(50) * 1e3, scraper.pct(99) * 1e3
    return out


def _feed(lines: list[bytes], pipes: list[IO[bytes]], rate: float, stop_event: threading.Event) -> None:
    due = time.monotonic()
    i = 0
    while not stop_event.is_set():
        line = lines[i % len(lines)]
        for p in pipes:
            try:
                p.write(line + b"\n")
                p.flush()
            except OSError:
                return
        i += 1
        due += 1.0 / rate
        stop_event.wait(max(due - time.monotonic(), 0.0))


def vs_aws_style(
    lines: list[bytes], seconds: float = 20.0, reports: float = 10.0, scrapes: float = 2.0
) -> dict[str, float]:
    """CPU and scrape latency of our exporter vs the AWS-style baseline on the same stream, at the same time."""
    ours, our_port = start_ours(subprocess.PIPE)
    base, base_port = start_aws_style(subprocess.PIPE)
    assert ours.stdin is not None and base.stdin is not None
    stop_event = threading.Event()
    feeder = threading.Thread(target=_feed, args=(lines, [ours.stdin, base.stdin], reports, stop_event), daemon=True)
    feeder.start()
    try:
        wait_for(our_port, "execution_status_total")
        wait_for(base_port, "execution_status_total")
        time.sleep(2.0)
        our_scraper, base_scraper = Scraper(our_port, scrapes), Scraper(base_port, scrapes)
        cpu = _window({"ours": ours.pid, "base": base.pid}, [our_scraper, base_scraper], seconds)
    finally:
        stop_event.set()
        feeder.join(10)
        stop(ours, base)
    ratio = cpu["ours"] / cpu["base"]
    print(
        f"(b) trn2.48xlarge stream ({len(lines[0])} bytes/report), {reports:g} reports/s, {scrapes:g} scrapes/s "
        f"(gzip), {seconds:g} s, both at once"
    )
    print(f"    AWS-style (global Gauge/Counter)      {cpu['base'] / seconds * 1e3:8.2f} CPU ms/s")
    print(f"    neuron-monitor-prometheus             {cpu['ours'] / seconds * 1e3:8.2f} CPU ms/s")
    print(f"    CPU ratio ours / AWS-style            {ratio:8.3f}   (target <= 0.1)")
    print(
        f"    scrape p50/p99 ms while reports arrive: ours {our_scraper.pct(50) * 1e3:.2f}/"
        f"{our_scraper.pct(99) * 1e3:.2f} (target p99 <= 5), AWS-style {base_scraper.pct(50) * 1e3:.2f}/"
        f"{base_scraper.pct(99) * 1e3:.2f}; scrapes {len(our_scraper.latencies)}/{len(base_scraper.latencies)}"
    )
    return {"ratio": ratio, "p99_ms": our_scraper.pct(99) * 1e3}


def ab_vs_aws_style(
    lines: list[bytes], tree: Path, seconds: float = 20.0, reports: float = 10.0, scrapes: float = 2.0
) -> dict[str, float]:
    """One round of an A/B: this checkout's exporter (A), ``tree``'s (B) and the AWS-style baseline, all three
    fed the same stream and scraped at the same time; CPU of each and scrape latencies of A and B."""
    a, a_port = start_ours(subprocess.PIPE)
    b, b_port = start_ours(subprocess.PIPE, tree)
    base, base_port = start_aws_style(subprocess.PIPE)
    procs = (a, b, base)
    stop_event = threading.Event()
    pipes = [p.stdin for p in procs if p.stdin is not None]
    feeder = threading.Thread(target=_feed, args=(lines, pipes, reports, stop_event), daemon=True)
    feeder.start()
    try:
        for port in (a_port, b_port, base_port):
            wait_for(port, "execution_status_total")
        time.sleep(2.0)
        scrapers = [Scraper(port, scrapes) for port in (a_port, b_port, base_port)]
        cpu = _window({"a": a.pid, "b": b.pid, "base": base.pid}, scrapers, seconds)
    finally:
        stop_event.set()
        feeder.join(10)
        stop(*procs)
    sa, sb, _ = scrapers
    return {
        "a_cpu": cpu["a"],
        "b_cpu": cpu["b"],
        "base_cpu": cpu["base"],
        "a_p50": sa.pct(50) * 1e3,
        "a_p99": sa.pct(99) * 1e3,
        "b_p50": sb.pct(50) * 1e3,
        "b_p99": sb.pct(99) * 1e3,
    }
