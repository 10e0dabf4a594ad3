"""A real OTLP receiver that applies Prometheus's naming: VictoriaMetrics (``-opentelemetry.usePrometheusNaming``)
scrapes neuron-monitor-prometheus and receives neuron-monitor-otlp's pushes of the same simulated trn2.48xlarge
(16 runtimes, every group): both give the same series (names and labels; job, instance and the receiver's scope
labels aside) with the same values, read back from its storage.

Debian's prometheus packages (bookworm 2.42, trixie 2.53, sid 3.5) are all built without Prometheus's OTLP
receiver, so Prometheus's translation is checked in a Prometheus server nowhere here (``prom_translate`` holds its
rules, test_otlp_translation_e2e.py); VictoriaMetrics implements the same rules independently. Its binary comes
from Debian's package, fetched by ``scripts/otlp-receivers.sh`` into ``.venv/tools/`` (``make test-tools``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.exporters.otlp.otlp_helpers import record_lines, self_metric_names
from tests.exporters.otlp.receiver import free_port
from tests.exporters.prometheus.prom_process import ExporterProcess

REPO = Path(__file__).resolve().parents[3]
BINARY = Path(os.environ.get("VICTORIA_METRICS", REPO / ".venv" / "tools" / "victoria-metrics"))
REPORTS = 4
OWN = ("process_", "python_", "scrape_")  # the exporter process's and the scraper's own, not pushed
# the exporter's self-metrics are pushed too; these two differ by nature: when a report arrived (wall clock) and the
# staleness window (the scrape side runs with --stale-floor 600)
DIFFERENT = ("neuron_exporter_last_report_timestamp_seconds", "neuron_exporter_stale_after_seconds")
RECEIVER_LABELS = ("job", "instance", "scope_name", "scope_version")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not BINARY.exists(), reason="no VictoriaMetrics binary: make test-tools"),
]
Series = tuple[str, tuple[tuple[str, str], ...]]


class Victoria:
    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        scrape = workdir / "scrape.yml"
        scrape.write_text(
            "scrape_configs:\n  - job_name: scrape\n    scrape_interval: 1s\n"
            f"    static_configs:\n      - targets: [{json.dumps(target)}]\n"
        )
        self.log = open(workdir / "victoria.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(BINARY), f"-httpListenAddr=127.0.0.1:{self.port}", f"-storageDataPath={workdir / 'data'}",
             f"-promscrape.config={scrape}", "-opentelemetry.usePrometheusNaming",
             "-opentelemetry.promoteAllResourceAttributes=false", "-search.latencyOffset=0", "-search.disableCache",
             "-loggerLevel=WARN"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait(lambda: self.get("/health") is not None)

    @property
    def otlp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/opentelemetry/v1/metrics"

    def get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as r:
                return r.read()  # type: ignore[no-any-return]
        except OSError:
            return None

    def export(self, match: str) -> list[dict[str, Any]]:
        """Every stored sample of the series ``match`` selects (flushed first)."""
        self.get("/internal/force_flush")
        body = self.get("/api/v1/export?" + urllib.parse.urlencode({"match[]": match}))
        assert body is not None
        return [orjson.loads(line) for line in body.splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def wait(pred: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.25)


def key(metric: dict[str, str], own: frozenset[str]) -> Series | None:
    labels = dict(metric)
    name = labels.pop("__name__")
    if name.startswith(OWN) or name in ("up", "target_info", *DIFFERENT):
        return None
    if name.startswith("neuron_exporter_") and name not in own:
        return None  # the HTTP front's own (connections), which a push has not
    for label in RECEIVER_LABELS:
        labels.pop(label, None)
    return name, tuple(sorted(labels.items()))


def test_pushed_series_equal_the_scraped_ones_in_a_real_receiver(tmp_path: Path) -> None:
    lines = record_lines(tmp_path, REPORTS)
    exporter = ExporterProcess("--stale-floor", "600")  # a starved machine may take long between steps
    vm = Victoria(tmp_path, f"127.0.0.1:{exporter.port}")
    try:
        exporter.send(*lines)
        whole: list[int] = []  # the time of a scrape that saw every report

        def scraped_all() -> bool:
            for row in vm.export('neuron_exporter_reports_total{job="scrape"}'):
                whole.extend(t for t, v in zip(row["timestamps"], row["values"], strict=True) if v == REPORTS)
            return bool(whole)

        wait(scraped_all)
        otlp = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", "--endpoint", vm.otlp_url,
             "--host-name", "node-a"],
            input=b"".join(lines),
            capture_output=True,
            timeout=120,
        )  # fmt: skip
        assert otlp.returncode == 0, otlp.stderr.decode()
        summary = orjson.loads(otlp.stderr.decode().split(" summary ", 1)[1])
        assert summary["requests_sent"] == REPORTS + 1 and summary["rejected_points"] == 0, otlp.stderr.decode()
        at = whole[0]
        own = self_metric_names(lines[0])
        scraped: dict[Series, float] = {}
        for row in vm.export('{job="scrape"}'):
            k = key(row["metric"], own)
            if k is not None and at in row["timestamps"]:
                scraped[k] = row["values"][row["timestamps"].index(at)]
        pushed: dict[Series, float] = {}
        last_report = int(orjson.loads(lines[-1])["report_time"] * 1000)

        def stored(row: dict[str, Any]) -> bool:
            """Every push of this series is searchable (the receiver stores asynchronously)."""
            k = key(row["metric"], own)
            return k is None or len(row["timestamps"]) == REPORTS + k[0].startswith("neuron_exporter_")

        rows: list[dict[str, Any]] = []

        def all_stored() -> bool:
            rows[:] = vm.export('{scope_name="neuron-monitor-otlp"}')
            return len(rows) >= len(scraped) and all(stored(row) for row in rows)

        wait(all_stored)
        for row in rows:
            k = key(row["metric"], own)
            if k is not None:
                own_metric = k[0].startswith("neuron_exporter_")  # also pushed once more at end of input
                assert len(row["timestamps"]) == REPORTS + own_metric and last_report in row["timestamps"], k
                pushed[k] = row["values"][row["timestamps"].index(last_report)]
    finally:
        vm.stop()
        exporter.stop()
    assert len(scraped) > 1000
    assert set(pushed) == set(scraped), (sorted(set(pushed) - set(scraped))[:5], sorted(set(scraped) - set(pushed))[:5])
    for k, v in scraped.items():
        assert math.isclose(pushed[k], v, rel_tol=1e-9, abs_tol=1e-9), (k, pushed[k], v)
