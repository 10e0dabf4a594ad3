"""Fixtures for the CloudWatch exporter tests: real reports, a real moto server, a fault-injecting HTTP proxy,
and read-back helpers that count what CloudWatch (moto) stored per series."""

from __future__ import annotations

import copy
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest
from botocore.config import Config

from neuron_monitor.exporters.cloudwatch.datum import Datum

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "reports"  # real reports, see its README.md


@pytest.fixture(scope="session")
def trn1_report() -> dict[str, Any]:
    """The real trn1n.32xlarge report (2 runtimes, 32 NeuronCores, 16 devices)."""
    return orjson.loads((DATA / "cwagent-test_trn1n32xl_report_line.json").read_bytes())


@pytest.fixture(scope="session")
def wandb_reports() -> list[dict[str, Any]]:
    """The three real trn1.2xlarge reports (latency percentiles present)."""
    lines = (DATA / "wandb_trn1-2xl_reports.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if line.strip()]


def report_sequence(base: dict[str, Any], n: int, start: float, step: float = 5.0) -> list[dict[str, Any]]:
    """n copies of a report with increasing report_time and values that differ per report."""
    out = []
    for i in range(n):
        r = copy.deepcopy(base)
        r["report_time"] = start + i * step
        for entry in r.get("neuron_runtime_data") or []:
            stats = entry["report"].get("execution_stats")
            if stats:
                stats["execution_summary"]["completed"] = 100 + 7 * i
            cores = entry["report"].get("neuroncore_counters", {}).get("neuroncores_in_use", {})
            for core in cores.values():
                core["neuroncore_utilization"] = round((i * 3.5 + len(core)) % 100, 3)
        out.append(r)
    return out


def encode_lines(reports: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in reports)


def exporter_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "neuron_monitor.exporters.cloudwatch.cli", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port}")


def aws_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        # moto's server mode fails on gzip bodies (research/anchors.md §4.3); compression is botocore's business
        AWS_DISABLE_REQUEST_COMPRESSION="true",
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A real moto server subprocess (HTTP), started once per session."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=aws_env(),
    )
    try:
        wait_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def moto_url(moto_server: str) -> str:
    """The moto server, emptied first (its GetMetricData does not filter by namespace)."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10)
    return moto_server


def cw_client(url: str) -> Any:
    return boto3.client(
        "cloudwatch",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(disable_request_compression=True, retries={"total_max_attempts": 3}),
    )


SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


def expected_totals(datums: list[Datum]) -> dict[SeriesKey, tuple[int, float]]:
    """Per series: (sample count, sum) that CloudWatch must hold after every datum arrived exactly once."""
    out: dict[SeriesKey, tuple[int, float]] = {}
    for d in datums:
        key = (d.name, tuple(sorted(d.dims)))
        n, s = out.get(key, (0, 0.0))
        out[key] = (n + d.samples(), s + sum(v * c for v, c in d.sample_values()))
    return out


def stored_totals(
    client: Any, namespace: str, keys: list[SeriesKey], start: float, end: float
) -> dict[SeriesKey, tuple[int, float]]:
    """Per series: (SampleCount, Sum) stored between start and end, read back with GetMetricData."""
    queries = []
    for i, (name, dims) in enumerate(keys):
        metric = {
            "Namespace": namespace,
            "MetricName": name,
            "Dimensions": [{"Name": n, "Value": v} for n, v in dims],
        }
        for stat in ("SampleCount", "Sum"):
            queries.append({"Id": f"{stat.lower()}{i}", "MetricStat": {"Metric": metric, "Period": 60, "Stat": stat}})
    results: dict[str, float] = {}
    t0 = datetime.fromtimestamp(start - 120, timezone.utc)
    t1 = datetime.fromtimestamp(end + 120, timezone.utc)
    for j in range(0, len(queries), 500):
        resp = client.get_metric_data(MetricDataQueries=queries[j : j + 500], StartTime=t0, EndTime=t1)
        for r in resp["MetricDataResults"]:
            results[r["Id"]] = sum(r["Values"])
    return {key: (int(results[f"samplecount{i}"]), results[f"sum{i}"]) for i, key in enumerate(keys)}


def listed_series(client: Any, namespace: str) -> set[SeriesKey]:
    """ListMetrics, deduplicated on (name, dims): moto lists a series once per put (research/anchors.md §4.3)."""
    out: set[SeriesKey] = set()
    for page in client.get_paginator("list_metrics").paginate(Namespace=namespace):
        for m in page["Metrics"]:
            out.add((m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))))
    return out


# ---- fault-injecting proxy ----------------------------------------------------------------------------------------

_THROTTLING_CBOR = bytes([0xA1, 0x66]) + b"__type" + bytes([0x6A]) + b"Throttling"  # {"__type": "Throttling"}
_THROTTLING_XML = (
    b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
    b"<RequestId>1</RequestId></ErrorResponse>"
)


class FaultProxy:
    """An HTTP proxy in front of moto. ``plan(n)`` (n = 0, 1, ... per request) returns "pass", "throttle" (HTTP 400
    Throttling, as CloudWatch answers "Rate exceeded") or "503"; ``log`` records each request's fate."""

    def __init__(self, upstream: str, plan: Callable[[int], str], port: int = 0) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.plan = plan
        self.log: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with proxy._lock:
                    n = len(proxy.log)
                    fate = proxy.plan(n)
                    proxy.log.append(fate)
                if fate == "throttle":
                    self._throttle()
                    return
                if fate == "503":
                    self._answer(503, b"", {"Content-Type": "text/plain"})
                    return
                conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                hop = ("content-length", "connection", "server", "date")
                passthrough = {k: v for k, v in resp.getheaders() if k.lower() not in hop}
                conn.close()
                self._answer(resp.status, data, passthrough)

            def _throttle(self) -> None:
                """HTTP 400 Throttling in the protocol the client spoke (JSON, CBOR or query/XML)."""
                kind = self.headers.get("Content-Type", "")
                if "cbor" in kind:
                    body, ctype = _THROTTLING_CBOR, "application/cbor"
                elif "json" in kind:
                    body, ctype = b'{"__type":"Throttling","message":"Rate exceeded"}', kind
                else:
                    body, ctype = _THROTTLING_XML, "text/xml"
                headers = {"Content-Type": ctype, "x-amzn-query-error": "Throttling;Sender"}
                if "cbor" in kind:
                    headers["smithy-protocol"] = "rpc-v2-cbor"
                self._answer(400, body, headers)

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self, fate: str) -> int:
        with self._lock:
            return self.log.count(fate)
