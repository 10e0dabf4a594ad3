"""Benchmark: scrape latency of two exporter checkouts side by side, with the client apart from the feeder.

Each exporter reads its own feeder process through a shell pipe (``python bench/bench_scrape_latency.py feed |
exporter``: the bench's trn2.48xlarge stream at ``--reports`` per second) and is scraped by its own process on a
keep-alive connection with gzip, as Prometheus scrapes; both run at once, and the order in which they are started
alternates by round. Unlike ``bench_prometheus.py --against`` no Python process both writes reports and times
scrapes (there, the scrapers wait for the feeder thread's interpreter lock). Prints each side's pooled
p50/p90/p99/max over every round; nothing here passes or fails. Beside them in every round, scraped the same way,
runs the machine's floor: a trivial asyncio server in its own process that answers each request with a ready
12 KB body (``floor_server``): its p99 is what waking an idle process costs on this machine at that moment.

    python3 bench/bench_scrape_latency.py A_CHECKOUT B_CHECKOUT [--rounds 2] [--seconds 60] [--scrapes 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def feed(rate: float) -> None:
    """Write the bench's report lines to stdout at ``rate`` per second (0: one report, then nothing)."""
    from bench.bench_prometheus import report_lines

    lines = report_lines(200)
    out = sys.stdout.buffer
    due, i = time.monotonic(), 0
    while True:
        out.write(lines[i % len(lines)] + b"\n")
        out.flush()
        i += 1
        if rate <= 0:
            signal.pause()
        due += 1.0 / rate
        time.sleep(max(due - time.monotonic(), 0.0))


def scrape(port: int, rate: float, seconds: float) -> None:
    """GET /metrics with gzip ``rate`` times a second for ``seconds``; print the latencies (JSON, seconds)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out: list[float] = []
    due = time.monotonic()
    end = due + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        conn.getresponse().read()
        out.append(time.perf_counter() - t)
        due += 1.0 / rate
        time.sleep(max(due - time.monotonic(), 0.0))
    print(json.dumps(out))


FLOOR_BODY_BYTES = 12 * 1024  # about our gzip body for the bench's trn2.48xlarge report


def floor_server() -> None:
    """The machine's floor: a trivial asyncio HTTP/1.1 server in its own process that answers every request with
    the same ready body (no report, no work), so what its scrapes take is the wake-up of an idle process and the
    loopback round trip on this machine at this moment. Prints its port on stderr, as the exporter does."""
    import asyncio

    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {FLOOR_BODY_BYTES}\r\n\r\n"
    response = head.encode() + os.urandom(FLOOR_BODY_BYTES)

    class Answer(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport, self.buffer = transport, b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while b"\r\n\r\n" in self.buffer:
                _, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
                self.transport.write(response)

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Answer, "127.0.0.1", 0)
        sys.stderr.write(f"floor server at 127.0.0.1 port {server.sockets[0].getsockname()[1]}\n")
        sys.stderr.flush()
        await server.serve_forever()

    asyncio.run(serve())


def _start_floor() -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen([sys.executable, __file__, "floor"], stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    m = re.search(r"port (\d+)", proc.stderr.readline().decode())
    if not m:
        raise SystemExit("the floor server did not start")
    return proc, int(m.group(1))


def _start(tree: Path, reports: float) -> tuple[subprocess.Popen[bytes], int]:
    me, py = shlex.quote(str(Path(__file__).resolve())), shlex.quote(sys.executable)
    command = f"{py} {me} feed --reports {reports} | exec {py} -m neuron_monitor.exporters.prometheus.cli --port 0"
    proc = subprocess.Popen(command, shell=True, cwd=tree, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    for _ in range(50):
        m = re.search(r"port (\d+)", proc.stderr.readline().decode())
        if m:
            return proc, int(m.group(1))
    raise SystemExit(f"the exporter of {tree} did not start")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="+", help="A_CHECKOUT B_CHECKOUT, or 'feed' (the feeder, used by the bench)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--scrapes", type=float, default=2.0, help="scrapes per second of each exporter (2)")
    ap.add_argument("--reports", type=float, default=10.0, help="reports per second (10; 0: one, then none)")
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.what == ["feed"]:
        feed(args.reports)
        return 0
    if args.what == ["floor"]:
        floor_server()
        return 0
    if args.what[0] == "scrape":
        scrape(args.port, args.scrapes, args.seconds)
        return 0
    trees = [Path(t).resolve() for t in args.what]
    floor = Path("floor")  # the trivial server (``floor_server``), scraped beside the exporters in every round
    pooled: dict[Path, list[float]] = {t: [] for t in [*trees, floor]}
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        started = {t: _start(t, args.reports) for t in order}
        started[floor] = _start_floor()
        order = [*order, floor]
        try:
            time.sleep(4.0)
            scrapers = {
                t: subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "scrape",
                        "--port",
                        str(started[t][1]),
                        "--scrapes",
                        str(args.scrapes),
                        "--seconds",
                        str(args.seconds),
                    ],
                    stdout=subprocess.PIPE,
                )
                for t in order
            }
            for t in order:
                pooled[t] += json.loads(scrapers[t].communicate()[0])
        finally:
            for proc, _ in started.values():
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
    print(f"load {os.getloadavg()[0]:.2f}; latencies in ms (floor: a trivial asyncio server, a fixed body, same rate)")
    for t in [*trees, floor]:
        v = pooled[t]
        p50, p90, p99 = (pct(v, p) * 1e3 for p in (50, 90, 99))
        print(
            f"{t}: n={len(v)} p50 {p50:.2f} p90 {p90:.2f} p99 {p99:.2f} max {max(v) * 1e3:.2f} p99/p50 {p99 / p50:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
