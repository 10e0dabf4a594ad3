"""efa_counters reaches every consumer from its spec alone: /metrics (efa_<counter>_total, efa_link_up),
neuron-monitor-det (a retransmit storm and a link down as problems), the trace (its tracks) and
neuron-monitor-top --once (each Neuron device's EFA throughput), on recorded reports."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.timeline import det_cli
from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.selection import Selection
from neuron_monitor.top import cli as top_cli
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.schema.conftest import aws_reports
from tests.timeline import tef
from tests.timeline.factory import record


def _report(time: float, retrans: int, link_up: bool = True) -> dict[str, Any]:
    report = copy.deepcopy(aws_reports()[-1])
    report["report_time"] = time
    port = {
        "efa_device": "rdmap16s27", "port": "1", "pci_address": "0000:10:1b.0", "neuron_device_indexes": [0],
        "state": "ACTIVE" if link_up else "DOWN", "link_up": link_up, "rate_gbps": 100.0,
        "counters": {"tx_bytes": 50_000_000, "rx_bytes": 30_000_000, "tx_pkts": 10_000, "retrans_pkts": retrans},
    }  # fmt: skip
    report["system_data"]["efa_counters"] = {"period": 5.0, "efa_ports": [port], "error": "", "fresh": True}
    return report


def test_efa_reaches_metrics_det_trace_and_top(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = [_report(1000.0, 2), _report(1005.0, 900), _report(1010.0, 800, link_up=False), _report(1015.0, 1)]
    series = parse(scrape(feed(reports[:2])))
    labels = {"efa_device": "rdmap16s27", "port": "1", "neuron_device_index": "0"}
    assert one(series, "efa_retrans_pkts_total", **labels) == 902.0
    assert one(series, "efa_link_up", **labels) == 1.0

    rec = record(tmp_path / "r.gz", reports)
    trace = tmp_path / "det.json"
    assert det_cli.main([str(rec), "-o", str(trace)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("efa_retransmit_storm EFA rdmap16s27 port 1") for line in lines), lines
    assert any(line.startswith("efa_link_down EFA rdmap16s27 port 1") for line in lines), lines
    assert det_cli.main(["--rules"]) == 0
    rules = capsys.readouterr().out
    assert "efa_retransmit_storm" in rules and "efa_impaired_remote_connections" in rules

    out = tmp_path / "t.json"
    run([str(rec)], Selection(), Detector(Selection()), str(out))
    counters = tef.counters(tef.check_trace(out))
    assert any(k.endswith("EFA bytes/s") for k in counters), sorted(counters)

    assert top_cli.main(["--once", "--replay", str(rec), "--width", "160"]) == 0
    screen = capsys.readouterr().out.splitlines()
    header = next(line for line in screen if line.startswith("dev "))
    assert " efa " in f"{header} ", header
    assert re.search(r"^\s+0 \[.*16\.0MB/s", "\n".join(screen), re.M), screen  # device 0: 80 MB over 5 s


def test_a_host_without_adapters_is_not_a_failing_group() -> None:
    """No EFA adapter (inf2, trn1.2xlarge): the group's empty body and clear error are a fact about the host, so
    neuron_exporter_group_success stays 1 (NeuronMonitorGroupFailing would otherwise fire on every such node) and
    no EFA series is made; any other error still counts as a failure."""
    absent = copy.deepcopy(aws_reports()[-1])
    absent["system_data"]["efa_counters"] = {
        "period": 5.0,
        "error": "no EFA adapters under /sys/class/infiniband (no EFA interface attached, or the efa driver is ...)",
        "fresh": True,
    }
    series = parse(scrape(feed([absent])))
    assert one(series, "neuron_exporter_group_success", group="efa_counters") == 1.0
    assert not [k for k in series if k[0].startswith("efa_")]
    failing = copy.deepcopy(absent)
    failing["system_data"]["efa_counters"]["error"] = "rdmap16s27 port 1: state: Permission denied"
    series = parse(scrape(feed([failing])))
    assert one(series, "neuron_exporter_group_success", group="efa_counters") == 0.0
