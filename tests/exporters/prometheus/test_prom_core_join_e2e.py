"""The join documented in docs/prometheus.md (per-device views through neuroncore_info) run by a real Prometheus
server against two real exporters fed the same reports, one with --core-labels aws, one with the default."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_reports import runtime, trn2_report
from tests.exporters.prometheus.prom_server import PROMETHEUS, PrometheusServer

REPO = Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="prometheus (Debian package) missing"),
]


def documented_join() -> str:
    """The PromQL block of the 'Core labels' section of docs/prometheus.md."""
    text = (REPO / "docs" / "prometheus.md").read_text()
    section = text[text.index("### Core labels") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1).strip()


def by_device(prom: PrometheusServer, expr: str, instance: str) -> dict[str, float]:
    return {
        r["metric"].get("neuron_device_index", ""): round(float(r["value"][1]), 9)
        for r in prom.query(expr)
        if r["metric"].get("instance") == instance
    }


def test_documented_join_gives_the_aws_mode_the_device_view(tmp_path: Path) -> None:
    # cores of 3 runtimes spread over devices 0, 1 and 3; utilization differs per core
    runtimes = [runtime(1, "a", [0, 1, 4]), runtime(2, "b", [5, 6]), runtime(3, "c", [13])]
    aws, dev = ExporterProcess("--core-labels", "aws"), ExporterProcess()
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            report = trn2_report(runtimes, report_time=time.time())
            for exporter in (aws, dev):
                exporter.send(report)
            stop.wait(0.5)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    prom = PrometheusServer(tmp_path, [f"127.0.0.1:{aws.port}", f"127.0.0.1:{dev.port}"])
    try:
        aws_target, dev_target = f"127.0.0.1:{aws.port}", f"127.0.0.1:{dev.port}"
        direct = "sum by (instance, neuron_device_index) (neuroncore_utilization_ratio)"
        deadline = time.monotonic() + 60
        want: dict[str, float] = {}
        got: dict[str, float] = {}
        while time.monotonic() < deadline:
            want = by_device(prom, direct, dev_target)
            got = by_device(prom, documented_join(), aws_target)
            if set(want) == {"0", "1", "3"} and got == want:
                break
            time.sleep(0.5)
        assert set(want) == {"0", "1", "3"}, want
        assert got == want
        # the same query works unchanged on an exporter in the default mode
        assert by_device(prom, documented_join(), dev_target) == want
        # and without the join the aws mode has no device to group by
        assert set(by_device(prom, direct, aws_target)) == {""}
    finally:
        stop.set()
        feeder.join(10)
        prom.stop()
        aws.stop()
        dev.stop()
