"""The CloudWatch series budget and its cost (issue 43 item 7): what `--series-detail budget` (the default) leaves
out, that `full` sends everything, and that the figures in docs/cloudwatch.md's cost table are what the real daemon's
reports map to and what the list prices make of them."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor.exporters.cloudwatch.detail import (
    EFA_BUDGET,
    FROM_FIRST_NONZERO,
    FULL_ONLY,
    KEEP_ONLY,
    SeriesBudget,
)
from neuron_monitor.exporters.cloudwatch.mapping import MapOptions, ReportMapper
from neuron_monitor.schema.spec import CwMetric, registry
from tests.exporters.cloudwatch.conftest import aws_env, exporter_cmd

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from bench import cloudwatch_cost as cost  # noqa: E402

DOC = (REPO / "docs" / "cloudwatch.md").read_text()


def spec_metrics() -> dict[str, CwMetric]:
    """Every CloudWatch metric the group specs declare, by name."""
    out: dict[str, CwMetric] = {}
    names = [*registry().system, *registry().runtime]
    for group in names:
        module = importlib.import_module(f"neuron_monitor.groups.{group}.spec")
        for value in vars(module).values():
            if isinstance(value, CwMetric):
                out[value.name] = value
            elif isinstance(value, dict):
                out.update({m.name: m for m in value.values() if isinstance(m, CwMetric)})
    return out


def test_every_name_the_budget_lists_is_a_metric_of_a_spec() -> None:
    metrics = spec_metrics()
    for name in [*FULL_ONLY, *KEEP_ONLY, *FROM_FIRST_NONZERO, *EFA_BUDGET]:
        assert name in metrics, f"detail.py names {name!r}, which no group spec declares"
    for base, kept in KEEP_ONLY.items():
        assert metrics[base].keyed and all(k.startswith(base) for k in kept)
    efa = {n for n in metrics if n.startswith("efa_")}
    assert efa > EFA_BUDGET and len(efa) == 23


def _metric(name: str) -> CwMetric:
    return spec_metrics()[name]


def test_budget_rules() -> None:
    b = SeriesBudget()
    dims = (("InstanceId", "i-1"), ("NeuronDevice", "0"))
    assert not b.keep(_metric("NeuronDeviceMemoryPeak"), "NeuronDeviceMemoryPeakTensors", dims, 5.0)
    assert not b.keep(_metric("NeuronDeviceHealthy"), "NeuronDeviceHealthy", dims, 1.0)
    assert b.keep(_metric("DeviceHealthy"), "DeviceHealthy", dims, 1.0)
    assert b.keep(_metric("DeviceLatency"), "DeviceLatencyP99", dims, 0.1)
    assert not b.keep(_metric("DeviceLatency"), "DeviceLatencyP25", dims, 0.1)
    assert b.keep(_metric("ExecutionLatency"), "ExecutionLatencyP25", dims, 0.1)  # AWS's family: whole
    assert b.keep(_metric("efa_retrans_pkts"), "efa_retrans_pkts", dims, 0.0)
    assert not b.keep(_metric("efa_rdma_read_wrs"), "efa_rdma_read_wrs", dims, 3.0)
    used = _metric("NeuronDeviceMemoryUsed")
    assert not b.keep(used, "NeuronDeviceMemoryUsedTensors", dims, 0.0)  # never held memory: not sent
    assert b.keep(used, "NeuronDeviceMemoryUsedTensors", dims, 4096.0)  # first non-zero value
    assert b.keep(used, "NeuronDeviceMemoryUsedTensors", dims, 0.0)  # from then on, its return to 0 too
    assert not b.keep(used, "NeuronDeviceMemoryUsedTensors", (("NeuronDevice", "1"),), 0.0)


def test_full_is_the_mappers_default_and_the_budget_a_subset(trn1_report: dict[str, Any]) -> None:
    full = ReportMapper().map(trn1_report)
    budget = ReportMapper(options=MapOptions(detail="budget")).map(trn1_report)
    assert {(d.name, d.dims) for d in budget} <= {(d.name, d.dims) for d in full}


def _doc_rows() -> list[tuple[str, int, str, cost.Figures, list[str]]]:
    """The rows of docs/cloudwatch.md's cost table: shape, runtimes, detail, figures, the dollar cells."""
    rows = []
    pattern = re.compile(r"^\| (\S+) \((\d+)\) \| (budget|full) \| ([\d,]+) \| (\d+) \| (\d+) \| (.*) \|$")
    for line in DOC.split("## Cost", 1)[1].splitlines():
        m = pattern.match(line)
        if m:
            f = cost.Figures(int(m[4].replace(",", "")), 0, int(m[5]), int(m[6]) * 1000)
            rows.append((m[1], int(m[2]), m[3], f, [c.strip() for c in m[7].split("|")]))
    return rows


def test_the_docs_dollars_follow_from_the_docs_figures() -> None:
    rows = _doc_rows()
    assert {(r[0], r[2]) for r in rows} >= {("trn2.48xlarge", "budget"), ("trn2.48xlarge", "full")}
    for shape, _, detail, f, dollars in rows:
        c = cost.monthly_cost(f, 5.0)
        want = [f"{c.metrics_first_tier:,.0f} / {c.metrics_second_tier:,.0f}", f"{c.api_requests:.2f}"]
        assert dollars[:2] == want, (shape, detail)
        assert abs(float(dollars[2]) - c.emf_logs) <= 0.5 * 518_400 * 1000 / 1e9 * 0.5, (shape, detail)  # KB rounding


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["trn2.48xlarge", "trn1.2xlarge"])
def test_the_docs_figures_are_what_the_daemons_reports_map_to(shape: str) -> None:
    """The real daemon on the simulator (configs/monitor.conf): metrics within 3 % of the table (the workload moves
    a few device-memory categories), the same number of calls, EMF bytes within 5 %."""
    rows = {(r[0], r[2]): r for r in _doc_rows()}
    runtimes = rows[(shape, "full")][1]
    report = cost.report_of(shape, runtimes)
    for detail in ("budget", "full"):
        got = cost.figures(report, detail)
        want = rows[(shape, detail)][3]
        assert abs(got.metrics - want.metrics) <= 0.03 * want.metrics, (detail, got, want)
        assert got.calls == want.calls, (detail, got, want)
        assert abs(got.emf_bytes - want.emf_bytes) <= 0.05 * want.emf_bytes, (detail, got, want)
    budget, full = cost.figures(report, "budget"), cost.figures(report, "full")
    assert budget.metrics < full.metrics
    if shape == "trn2.48xlarge":
        assert budget.metrics <= 1_500  # the budget's cap on the largest shape, as the Prometheus one


@pytest.mark.e2e
def test_the_command_sends_the_budget_by_default(tmp_path: Path) -> None:
    """neuron-monitor-cloudwatch --output emf on a simulated trn1.2xlarge's report: the default leaves out what the
    budget leaves out, --series-detail full sends it."""
    line = orjson.dumps(cost.report_of("trn1.2xlarge", 2)) + b"\n"

    def names(*args: str) -> set[str]:
        proc = subprocess.run(exporter_cmd("--output", "emf", *args), input=line, capture_output=True,
                              env=aws_env(), timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        return {m["Name"] for ev in proc.stdout.splitlines() for d in orjson.loads(ev)["_aws"]["CloudWatchMetrics"]
                for m in d["Metrics"]}  # fmt: skip

    default, full = names(), names("--series-detail", "full")
    assert default < full
    left_out = full - default
    assert any(n.startswith("NeuronDeviceMemoryPeak") for n in left_out)
    assert "NeuronDeviceHealthy" in left_out and "DeviceHealthy" in default
    assert {"DeviceLatencyP50", "DeviceLatencyP99"} <= default and "DeviceLatencyP25" in left_out
