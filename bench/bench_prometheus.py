"""Benchmark: neuron-monitor-prometheus ingest and scrape cost on a trn2.48xlarge report with 16 runtimes.

Prints, for our exporter and for a baseline in the same process that ingests the stream the way AWS's
``neuron-monitor-prometheus.py`` does (global client_python Gauge/Counter objects updated on every report,
``generate_latest`` on scrape): CPU per ingested report (JSON parse included, and without it), CPU per scrape,
scrape latency p50/p99 over real HTTP (gzip, as Prometheus asks), series count, and the process's peak RSS.
Figures are medians of repeated runs; nothing here passes or fails.

Then two process-level comparisons, each side by side in one run (see ``prometheus_load``): (a) Debian's
node_exporter vs our daemon + exporter serving host vCPU and memory, scraped 10/s; (b) our exporter vs the
AWS-style baseline as processes, fed the same stream at 10 reports/s and scraped 2/s. The ratios are printed.

    python3 bench/bench_prometheus.py [--reports 200] [--scrapes 200] [--only micro|node|aws] [--seconds 20]

``--only node --against TREE [--rounds 5]``: (a) as an interleaved A/B: node_exporter, this checkout's daemon +
exporter and TREE's, all scraped at once, the start order alternating by round; the ratios per round and medians.

``--only stages [--against TREE]``: where the CPU goes inside the running exporter (this checkout's, and TREE's at
the same time), fed the same stream at 10 reports/s and scraped twice a second with gzip: each stage's CPU on the
exporter's own thread clock (decode and counting per report; a publication -- shaping, rendering, gzip -- per
publication; a request's handling per scrape), over the same window as the process's CPU, so what the stages
leave out (the event loop, reading stdin) shows as the rest.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prometheus_client.exposition import generate_latest  # noqa: E402

from bench.aws_style_exporter import AwsStyleBaseline  # noqa: E402
from bench.inprocess import cpu_ms, median_cpu_ms  # noqa: E402
from bench.prometheus_load import (  # noqa: E402
    Scraper,
    _cpu_s,
    _feed,
    ab_vs_aws_style,
    ab_vs_node_exporter,
    stop,
    vs_aws_style,
    vs_node_exporter,
    wait_for,
)
from neuron_monitor.exporters.prometheus.app import ExporterApp  # noqa: E402
from neuron_monitor.exporters.prometheus.collector import ExporterCollector  # noqa: E402
from neuron_monitor.exporters.prometheus.server import HTTPFront  # noqa: E402
from neuron_monitor.exporters.prometheus.state import ExporterState  # noqa: E402
from tests.exporters.prometheus.prom_reports import runtime, trn2_report  # noqa: E402


def report_lines(n: int) -> list[bytes]:
    """``n`` distinct trn2.48xlarge reports (16 runtimes, 4 logical cores each), values changing per report."""
    lines = []
    for i in range(n):
        runtimes = [
            runtime(
                1000 + d,
                f"job-{d:02d}",
                [4 * d + c for c in range(4)],
                completed=100 + i + d,
                generic_errors=i % 3,
                utilization=40.0 + (i + d) % 50,
            )
            for d in range(16)
        ]
        lines.append(orjson.dumps(trn2_report(runtimes, report_time=1.7e9 + i, ecc=i % 2)))
    return lines


def cpu_per_call(fn: Any, args: list[Any], repeats: int = 5) -> float:
    """Median over ``repeats`` runs of the CPU seconds per call of ``fn`` over ``args``."""

    def run() -> None:
        for a in args:
            fn(a)

    return median_cpu_ms(run, repeats) / 1000 / len(args)


def http_latencies(port: int, n: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        resp = conn.getresponse()
        resp.read()
        out.append(time.perf_counter() - t)
    conn.close()
    return out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def against(lines: list[bytes], tree: Path, rounds: int, seconds: float) -> int:
    """``--against TREE``: rounds of (b) with this checkout's exporter (A), TREE's (B) and the AWS-style baseline
    at the same time; per round and as medians: CPU A/B, each / AWS-style, scrape p50/p99 of A and B."""
    print(f"A: {REPO}  B: {tree}  ({rounds} rounds of {seconds:g} s, 10 reports/s, 2 gzip scrapes/s, all at once)")
    print(f"{'round':>5} {'A/B cpu':>8} {'A/AWS':>7} {'B/AWS':>7} {'A p50':>7} {'A p99':>7} {'B p50':>7} {'B p99':>7}")
    rows = []
    for i in range(rounds):
        r = ab_vs_aws_style(lines, tree, seconds)
        row = [
            r["a_cpu"] / r["b_cpu"],
            r["a_cpu"] / r["base_cpu"],
            r["b_cpu"] / r["base_cpu"],
            r["a_p50"],
            r["a_p99"],
            r["b_p50"],
            r["b_p99"],
        ]
        rows.append(row)
        print(f"{i + 1:>5} " + " ".join(f"{v:{w}.3f}" for v, w in zip(row, (8, 7, 7, 7, 7, 7, 7), strict=True)))
    medians = [statistics.median(col) for col in zip(*rows, strict=True)]
    print("median " + " ".join(f"{v:7.3f}" for v in medians) + "   (latencies in ms)")
    return 0


def against_node(tree: Path, rounds: int, seconds: float) -> int:
    """``--only node --against TREE``: rounds of (a) with node_exporter, this checkout's daemon + exporter (A) and
    TREE's (B) at the same time, the start order of A and B alternating; per round and as medians: each pipeline /
    node_exporter, each exporter alone / node_exporter, exporter A / B, scrape p50/p99 of A and B."""
    print(f"A: {REPO}  B: {tree}  ({rounds} rounds of {seconds:g} s, 10 gzip scrapes/s each, all at once)")
    heads = ("A/node", "B/node", "Aexp/nd", "Bexp/nd", "Aexp/B", "node ms", "A p50", "A p99", "B p50", "B p99")
    print("round " + " ".join(f"{h:>8}" for h in heads))
    rows = []
    for i in range(rounds):
        r = ab_vs_node_exporter(tree, seconds, b_first=i % 2 == 1)
        node = r["node"]
        row = [
            (r["a_daemon"] + r["a_exporter"]) / node,
            (r["b_daemon"] + r["b_exporter"]) / node,
            r["a_exporter"] / node,
            r["b_exporter"] / node,
            r["a_exporter"] / r["b_exporter"],
            node / seconds * 1e3,
            r["a_p50"],
            r["a_p99"],
            r["b_p50"],
            r["b_p99"],
        ]
        rows.append(row)
        print(f"{i + 1:>5} " + " ".join(f"{v:8.3f}" for v in row), f" load {os.getloadavg()[0]:.1f}")
    medians = [statistics.median(col) for col in zip(*rows, strict=True)]
    print("median " + " ".join(f"{v:8.3f}" for v in medians) + "   (node ms: its CPU ms/s; latencies in ms)")
    return 0


# Run inside the exporter (``python -c``): time each stage on the thread clock; SIGUSR2 prints the sums so far.
STAGE_HOOK = r"""
import collections, json, signal, sys, time
from neuron_monitor.exporters.prometheus import collector, publish, server, state
try:
    from neuron_monitor.schema import stream
except ImportError:  # a checkout from before the reader moved to schema/
    from neuron_monitor.exporters import stream
cpu = collections.Counter()
calls = collections.Counter()
def timed(cls, name, tag):
    f = getattr(cls, name)
    def w(*a, **k):
        t = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            cpu[tag] += time.thread_time() - t
            calls[tag] += 1
    setattr(cls, name, w)
timed(stream.ReportStream, "decode", "decode")
timed(state.ExporterState, "apply", "counting")
timed(publish.Publisher, "_step", "publication")
rendered = getattr(publish, "Publication", None)
if not hasattr(rendered, "kept_parts"):  # a checkout from before the render cache moved to publish.Publication
    rendered = collector.RenderedReport
timed(rendered, "kept_parts", "rendering")
timed(rendered, "gzip", "gzip")
timed(server.Connection, "data_received", "request")
start = publish.Publisher._start
def started(self):
    calls["publications"] += 1
    return start(self)
publish.Publisher._start = started
def dump(*_):
    sys.stderr.write("STAGES " + json.dumps({"cpu": cpu, "calls": calls, "total": time.process_time()}) + "\n")
    sys.stderr.flush()
signal.signal(signal.SIGUSR2, dump)
sys.argv = ["neuron-monitor-prometheus", "--bind", "127.0.0.1", "--port", "0"]
from neuron_monitor.exporters.prometheus.cli import main
sys.exit(main())
"""
STAGES = ("decode", "counting", "publication", "rendering", "gzip", "request")


class StagedExporter:
    """An exporter of checkout ``tree`` with ``STAGE_HOOK``; ``sums()`` asks it for its stage sums so far."""

    def __init__(self, tree: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STAGE_HOOK], cwd=tree, stdin=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.port = 0
        self._sums: list[dict[str, Any]] = []
        assert self.proc.stderr is not None
        while not self.port:
            line = self.proc.stderr.readline().decode()
            if not line:
                raise RuntimeError(f"the exporter of {tree} did not start")
            if m := re.search(r"port (\d+)", line):
                self.port = int(m.group(1))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            if raw.startswith(b"STAGES "):
                self._sums.append(json.loads(raw[7:]))

    def sums(self) -> dict[str, Any]:
        had = len(self._sums)
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while len(self._sums) == had and time.monotonic() < deadline:
            time.sleep(0.01)
        return self._sums[-1]


def stages(lines: list[bytes], trees: list[Path], seconds: float) -> int:
    """``--only stages``: each tree's exporter, all at once on the same stream (see the module docstring)."""
    exporters = [StagedExporter(tree) for tree in trees]
    stop_event = threading.Event()
    pipes = [e.proc.stdin for e in exporters if e.proc.stdin is not None]
    feeder = threading.Thread(target=_feed, args=(lines, pipes, 10.0, stop_event), daemon=True)
    feeder.start()
    try:
        for e in exporters:
            wait_for(e.port, "execution_status_total")
        time.sleep(2.0)
        scrapers = [Scraper(e.port, 2.0) for e in exporters]
        for sc in scrapers:
            sc.start()
        before = [(e.sums(), _cpu_s(e.proc.pid)) for e in exporters]
        time.sleep(seconds)
        after = [(e.sums(), _cpu_s(e.proc.pid)) for e in exporters]
        for sc in scrapers:
            sc.stop()
    finally:
        stop_event.set()
        feeder.join(10)
        stop(*(e.proc for e in exporters))
    print(f"CPU inside the exporter over {seconds:g} s: 10 reports/s, 2 gzip scrapes/s (ms each, and ms/s)")
    for tree, (s0, c0), (s1, c1) in zip(trees, before, after, strict=True):
        total = (c1 - c0) / seconds * 1e3
        print(f"  {tree}: process {total:.2f} ms/s")
        staged = 0.0
        published = s1["calls"].get("publications", 0) - s0["calls"].get("publications", 0)
        for stage in STAGES:
            ms = (s1["cpu"].get(stage, 0.0) - s0["cpu"].get(stage, 0.0)) * 1e3
            n = s1["calls"].get(stage, 0) - s0["calls"].get(stage, 0)
            if stage in ("publication", "rendering", "gzip"):  # each per publication (rendering and gzip are in it)
                n = published
            if stage not in ("rendering", "gzip"):
                staged += ms
            print(f"    {stage:12} {ms / max(n, 1):7.3f} ms x {n / seconds:5.1f}/s = {ms / seconds:6.2f} ms/s")
        print(f"    {'the rest':12} {'':26}{total - staged / seconds:6.2f} ms/s  (event loop, reading stdin)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reports", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--only", choices=["micro", "node", "aws", "stages"], help="run one part only")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each process-level comparison (20)")
    ap.add_argument(
        "--against",
        metavar="TREE",
        type=Path,
        help="A/B of (b), or with --only node of (a), against the exporter of this checkout",
    )
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the A/B (with --against)")
    args = ap.parse_args()
    # this process's scraper and feeder threads hand the interpreter lock to one another: at the default 5 ms
    # switch interval a scraper woken by its response waited up to 5 ms for it, which showed as scrape latency
    # (both sides alike; p99 about 2x in A/B runs)
    sys.setswitchinterval(0.0005)
    lines = report_lines(args.reports)
    if args.only == "stages":
        return stages(lines, [REPO] + ([args.against] if args.against is not None else []), args.seconds)
    if args.against is not None and args.only == "node":
        return against_node(args.against, args.rounds, args.seconds)
    if args.against is not None:
        return against(lines, args.against, args.rounds, args.seconds)
    if args.only != "micro":
        if args.only in (None, "node"):
            vs_node_exporter(args.seconds)
        if args.only in (None, "aws"):
            vs_aws_style(lines, args.seconds)
        if args.only is not None:
            return 0

    gc.collect()
    ours = ExporterState(stale_periods=1e9)
    ours_ingest = cpu_per_call(lambda line: ours.apply(orjson.loads(line)), lines)
    base = AwsStyleBaseline()
    base_ingest = cpu_per_call(base.ingest, lines)
    ours_parse = cpu_per_call(orjson.loads, lines)
    base_parse = cpu_per_call(json.loads, lines)
    gc.collect()
    parsed = [orjson.loads(line) for line in lines[:20]]  # few: many live reports would make GC dominate

    collector = ExporterCollector(ours)
    scrape_runs = []  # each scrape sees a new report (reports every 1 s, scrapes every 15 s): shaping + render
    for _ in range(5):
        cpu = 0.0
        for d in parsed:
            ours.apply(d)
            cpu += cpu_ms(partial(collector.scrape, [], False)) / 1000
        scrape_runs.append(cpu / len(parsed))
    ours_scrape_cpu = statistics.median(scrape_runs)
    ours_rescrape_cpu = cpu_per_call(lambda _: collector.scrape([], False), list(range(args.scrapes // 5 or 1)))
    base_scrape_cpu = cpu_per_call(lambda _: generate_latest(base.registry), list(range(args.scrapes // 5 or 1)))
    ours_series = ours.view().shaped.series  # type: ignore[union-attr]
    base_series = sum(len(m.samples) for m in base.registry.collect())

    server = HTTPFront(("127.0.0.1", 0), ExporterApp(collector))
    server.start()
    feeder_stop = threading.Event()

    def feed() -> None:  # reports keep arriving while Prometheus scrapes, once a second as the daemon writes
        i = 0
        while not feeder_stop.wait(1.0):
            ours.apply(orjson.loads(lines[i % len(lines)]))
            i += 1

    threading.Thread(target=feed, daemon=True).start()
    ours_lat = http_latencies(server.server_address[1], args.scrapes)
    feeder_stop.set()
    server.stop()

    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            import gzip

            body = gzip.compress(generate_latest(base.registry))
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: Any) -> None:
            pass

    Handler.protocol_version = "HTTP/1.1"
    Handler.disable_nagle_algorithm = True
    bserver = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=bserver.serve_forever, daemon=True).start()
    base_lat = http_latencies(bserver.server_address[1], args.scrapes)
    bserver.shutdown()

    ms = 1e3
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    print(f"input: trn2.48xlarge report, 16 runtimes x 4 logical NeuronCores, 192 vCPUs, {len(lines[0])} bytes")
    print(f"{'':48}{'ours':>12}{'AWS-style':>12}{'ratio':>8}")
    rows = [
        ("CPU per report, parse+apply (ms)", ours_ingest * ms, base_ingest * ms),
        ("  of which JSON parsing (orjson / json) (ms)", ours_parse * ms, base_parse * ms),
        ("CPU per report, without parsing (ms)", (ours_ingest - ours_parse) * ms, (base_ingest - base_parse) * ms),
        ("CPU per scrape, new report (ms)", ours_scrape_cpu * ms, base_scrape_cpu * ms),
        ("CPU per scrape, same report (ms)", ours_rescrape_cpu * ms, base_scrape_cpu * ms),
        ("scrape latency p50, HTTP+gzip (ms)", statistics.median(ours_lat) * ms, statistics.median(base_lat) * ms),
        ("scrape latency p99, HTTP+gzip (ms)", pct(ours_lat, 99) * ms, pct(base_lat, 99) * ms),
        ("series", ours_series, base_series),
    ]
    minute_ours = 60 * ours_ingest + 4 * ours_scrape_cpu
    minute_base = 60 * base_ingest + 4 * base_scrape_cpu
    rows.append(("CPU per minute, 1 s reports, 15 s scrapes (ms)", minute_ours * ms, minute_base * ms))
    for name, a, b in rows:
        print(f"{name:48}{a:12.3f}{b:12.3f}{b / a:8.2f}x" if name != "series" else f"{name:48}{a:12d}{b:12d}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (both exporters): {rss:.1f} MiB")
    print("(ratio = AWS-style / ours; the baseline exports fewer families: no device latency, FLOPs, physical cores,")
    print(" models, host breakdown, self-metrics; its series count includes _created samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
