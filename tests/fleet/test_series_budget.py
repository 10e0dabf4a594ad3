"""The exporter's series budget (``--series-detail``, docs/fleet.md): a trn2.48xlarge with 16 runtimes (and its 16
EFA ports) stays at or under 1,500 series by default; every dashboard panel, alert and recording rule still finds its
series; AWS's families are never thinned; a counter served from its first count is still counted by the dashboard
(promtool); ``--series-detail full`` serves everything."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from bench.fleet.nodes import mark_unhealthy
from neuron_monitor.exporters.prometheus.cli import parse_args, runtime_collectors
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.exporters.prometheus.prom_helpers import Series, parse

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml"
# every series of the scrape: Neuron, host, EFA (16 ports), the exporter's own and the process's
BUDGET_LIMIT = 1500
# AWS's neuron-monitor-prometheus.py families (by sample name): the budget never touches them
AWS_SAMPLES = (
    "neuroncore_utilization_ratio",
    "neuroncore_memory_usage_constants",
    "neuroncore_memory_usage_model_code",
    "neuroncore_memory_usage_model_shared_scratchpad",
    "neuroncore_memory_usage_runtime_memory",
    "neuroncore_memory_usage_tensors",
    "neuron_runtime_memory_used_bytes",
    "neuron_runtime_vcpu_usage_ratio",
    "execution_errors_total",
    "execution_status_total",
    "execution_latency_seconds",
    "hardware_ecc_events_total",
    "system_vcpu_count",
    "system_vcpu_usage_ratio",
    "system_memory_total_bytes",
    "system_memory_used_bytes",
    "system_swap_total_bytes",
    "system_swap_used_bytes",
    "instance_info",
    "neuron_hardware_info",
)
# written by Prometheus, not by the exporter
FROM_PROMETHEUS = {"ALERTS", "up"}
# target labels Prometheus adds, and Grafana's variables
TARGET_LABELS = {"instance", "job", "node_group"}
# a matcher per value of a label that differs by instance type (the device memory capacity table): name only
PER_SHAPE_LABELS = {"neuron_device_memory_size"}


@pytest.fixture(scope="module")
def trn2_report() -> Iterator[dict[str, Any]]:
    """One report of the real daemon on a simulated trn2.48xlarge with 16 runtimes, device 0 reported unhealthy
    (so the component series exists, as the health panel and alert need). The simulator gets minutes to build the
    host (a busy machine needs more than ``--simulate``'s 30 s for this shape)."""
    sim = TemporarySimulator("trn2.48xlarge", runtimes=16, seed=3)
    sim.start(timeout=300.0)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(sim.root), "--once", "--no-imds"],
            capture_output=True, timeout=300, check=True, cwd=REPO,
        ).stdout  # fmt: skip
    finally:
        sim.close()
    report: dict[str, Any] = orjson.loads(next(line for line in out.splitlines() if line.strip()))
    assert len(report["neuron_runtime_data"]) == 16
    report["instance_info"].update(instance_id="i-0123456789abcdef0", instance_type="trn2.48xlarge")
    dev = report["system_data"]["neuron_device_telemetry"]["neuron_devices"][0]
    dev["healthy"], dev["unhealthy_components"] = False, ["hbm"]
    mark_unhealthy(report["system_data"], 0, "unhealthy_component", "health_component", "hbm", 1, 1.8e9, True)
    yield report


def scrape(reports: list[dict[str, Any]], detail: str, **options: Any) -> str:
    state = ExporterState(ShapeOptions(series_detail=detail, **options))
    for r in reports:
        assert state.apply(copy.deepcopy(r))
    return ExporterCollector(state).scrape(runtime_collectors(), False).decode()


def series_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def test_the_default_is_the_budget_and_full_is_one_option() -> None:
    assert parse_args([]).series_detail == "budget"
    assert parse_args(["--series-detail", "full"]).series_detail == "full"
    assert ShapeOptions().series_detail == "budget"


def test_trn2_with_16_runtimes_stays_within_the_budget(
    trn2_report: dict[str, Any], record_property: Callable[[str, object], None], capsys: pytest.CaptureFixture[str]
) -> None:
    """Also says how much room is left (``-s``, or the JUnit property ``series_headroom``): a new family declares
    its `Budget` in its spec, and this headroom is what it may take at full detail (docs/architecture.md)."""
    budget, full = scrape([trn2_report], "budget"), scrape([trn2_report], "full")
    count = series_count(budget)
    record_property("series_headroom", BUDGET_LIMIT - count)
    with capsys.disabled():
        print(f"\nseries budget: {count} of {BUDGET_LIMIT} series on a trn2.48xlarge, {BUDGET_LIMIT - count} left")
    assert count <= BUDGET_LIMIT, f"{count} series: {count - BUDGET_LIMIT} over the budget of {BUDGET_LIMIT}"
    assert series_count(full) > 2600, series_count(full)  # the whole set (2,798 when the budget was introduced)


def test_full_detail_is_a_superset_and_the_budget_only_removes(trn2_report: dict[str, Any]) -> None:
    budget, full = parse(scrape([trn2_report], "budget")), parse(scrape([trn2_report], "full"))
    neuron = {k: v for k, v in budget.items() if not k[0].startswith(("neuron_exporter_", "process_", "python_"))}
    for key, value in neuron.items():
        assert full.get(key) == value, key
    names = {n for n, _ in full} - {n for n, _ in budget}
    assert {"neuroncore_device_executions_total", "neuron_device_memory_peak_bytes", "neuroncore_info"} <= names


def test_aws_families_are_never_thinned(trn2_report: dict[str, Any]) -> None:
    for options in ({}, {"core_device_label": False}):
        budget = parse(scrape([trn2_report], "budget", **options))
        full = parse(scrape([trn2_report], "full", **options))
        for name in AWS_SAMPLES:
            kept = {k: v for k, v in budget.items() if k[0] == name}
            assert kept, name
            assert kept == {k: v for k, v in full.items() if k[0] == name}, name


def test_core_info_is_served_where_per_core_series_lack_the_device(trn2_report: dict[str, Any]) -> None:
    aws = parse(scrape([trn2_report], "budget", core_device_label=False))
    assert sum(1 for n, _ in aws if n == "neuroncore_info") == 64


def test_a_fault_kind_is_served_from_its_first_event_on(trn2_report: dict[str, Any]) -> None:
    budget, full = parse(scrape([trn2_report], "budget")), parse(scrape([trn2_report], "full"))
    faults = "neuron_device_fault_events_total"
    assert sum(1 for n, _ in full if n == faults) == 16 * 5  # every kind of every device, at 0 but one
    served = [(dict(lab)["neuron_device_index"], dict(lab)["kind"], v) for (n, lab), v in budget.items() if n == faults]
    assert served == [("0", "health_component", 1.0)], served
    assert not [n for n, _ in budget if n == "neuron_device_healthy"]  # the verdict carries it


PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool (Debian package prometheus) missing")
def test_the_fault_panel_counts_a_kind_s_first_event(tmp_path: Path) -> None:
    """The node dashboard's fault-event panel, under promtool: a kind's series appears at its first event (value 1,
    at 5m) and grows later (3 at 12m). The panel shows the first event, which ``increase()`` alone misses."""
    doc = json.loads((REPO / "dashboards" / "neuron-monitor.json").read_text())
    panels = [p for top in doc["panels"] for p in (top, *top.get("panels", []))]
    (expr,) = [t["expr"] for p in panels if p.get("title") == "Device fault events" for t in p["targets"]]
    expr = expr.replace("$__rate_interval", "2m").replace('instance=~"$instance"', 'instance=~".+"')
    series = 'neuron_device_fault_events_total{instance="n1:8000",neuron_device_index="4",kind="ecc_uncorrected"}'
    shown = '{instance="n1:8000",neuron_device_index="4",kind="ecc_uncorrected"}'
    plain = expr.split(" or ")[0]
    cases = [(expr, "5m", 1), (expr, "6m", 1), (expr, "8m", None), (expr, "12m", 2), (expr, "15m", None),
             (plain, "5m", None), (plain, "12m", 2)]  # fmt: skip
    tests = [
        {"expr": e, "eval_time": at, "exp_samples": [] if want is None else [{"labels": shown, "value": want}]}
        for e, at, want in cases
    ]
    unit = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": "_x5 1x6 3x8"}],
                "promql_expr_test": tests,
            }
        ],
    }
    path = tmp_path / "fault_panel.yml"
    path.write_text(yaml.safe_dump(unit))
    done = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_memory_category_is_served_from_its_first_non_zero_value_on(trn2_report: dict[str, Any]) -> None:
    first = copy.deepcopy(trn2_report)
    second = copy.deepcopy(trn2_report)
    third = copy.deepcopy(trn2_report)
    for r, used in ((first, 0), (second, 4096), (third, 0)):
        dev = r["system_data"]["neuron_device_telemetry"]["neuron_devices"][0]
        dev["device_memory"]["collectives"] = {"used_bytes": used, "peak_bytes": used}
        r["report_time"] = float(r["report_time"]) + len(str(used))  # later each time
    state = ExporterState(ShapeOptions())
    seen = []
    for r in (first, second, third):
        assert state.apply(r)
        series = parse(ExporterCollector(state).scrape([], False).decode())
        seen.append(
            [
                v
                for (n, lab), v in series.items()
                if n == "neuron_device_memory_used_bytes"
                and ("category", "collectives") in lab
                and ("neuron_device_index", "0") in lab
            ]
        )
    assert seen == [[], [4096.0], [0.0]]  # once it held memory it stays (no series churn), at 0 again


# ---- every query finds its series under the budget ------------------------------------------------------------
SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
FUNCTIONS = {
    "sum", "avg", "max", "min", "count", "rate", "increase", "by", "without", "on", "ignoring", "group_left",
    "group_right", "and", "or", "unless", "bool", "offset", "time", "vector", "clamp_max", "label_replace",
    "timestamp", "quantile", "avg_over_time", "max_over_time", "histogram_quantile", "topk", "bottomk", "sort_desc",
    "abs", "count_values", "last_over_time", "absent", "scalar", "sort",
}  # fmt: skip


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every dashboard panel target and every rule."""
    out = []
    for path in sorted((REPO / "dashboards").glob("*.json")):
        doc = json.loads(path.read_text())
        panels = [p for top in doc["panels"] for p in (top, *top.get("panels", []))]
        out += [(f"{path.name}: {p.get('title')}", t["expr"]) for p in panels for t in p.get("targets", [])]
        for v in doc.get("templating", {}).get("list", []):
            if v.get("type") == "query":
                query = v["query"] if isinstance(v["query"], str) else v["query"]["query"]
                query = re.sub(r"label_values\(([^,()]+(?:\{[^}]*\})?),[^)]*\)", r"\1", query)  # its metric
                out.append((f"{path.name}: ${v['name']}", query))
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        out += [(f"rule {r.get('record') or r.get('alert')}", r["expr"]) for r in group["rules"]]
    return out


def selectors(expr: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """The series selectors of a query: (metric name or "", {label: (operator, value)})."""
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range windows
    expr = re.sub(r"\boffset\s+(\$\w+|[0-9][0-9a-z]*)", " ", expr)  # offsets
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    nameless = r"(^|[(,])(\s*)(\{[^}]*\})"  # a selector without a metric name: {__name__=~"..."}
    found = [("", {k: (op, v) for k, op, v in MATCHER.findall(m[2])}) for m in re.findall(nameless, expr)]
    expr = re.sub(nameless, r"\1\2", expr)
    for m in SELECTOR.finditer(re.sub(r'"(?:[^"\\]|\\.)*"(?![^{]*\})', '""', expr)):
        name, braces = m.group(1), m.group(2) or ""
        if name in FUNCTIONS or re.fullmatch(r"[0-9.e]+", name):
            continue
        if not braces and expr[m.end() :].lstrip().startswith("("):
            continue  # a function
        found.append((name, {k: (op, v) for k, op, v in MATCHER.findall(braces)}))
    return found


def matches(labels: frozenset[tuple[str, str]], name: str, want: dict[str, tuple[str, str]]) -> bool:
    have = dict(labels)
    for label, (op, value) in want.items():
        if "$" in value or label in TARGET_LABELS or label in PER_SHAPE_LABELS:
            continue
        got = name if label == "__name__" else have.get(label, "")
        ok = {"=": got == value, "!=": got != value, "=~": re.fullmatch(value, got) is not None,
              "!~": re.fullmatch(value, got) is None}[op]  # fmt: skip
        if not ok:
            return False
    return True


def test_every_dashboard_and_rule_query_finds_its_series_under_the_budget(trn2_report: dict[str, Any]) -> None:
    """Under both core-label modes together: some rule branches exist for --core-labels aws (the join through
    neuroncore_info), the others for the default."""
    shared = copy.deepcopy(trn2_report)  # a second runtime on job-00's cores (a profiler, say): shared cores
    entry = copy.deepcopy(shared["neuron_runtime_data"][0])
    entry["pid"], entry["neuron_runtime_tag"] = entry["pid"] + 1, "job-shared"
    shared["neuron_runtime_data"].append(entry)
    reports = [shared, {**shared, "report_time": shared["report_time"] + 1}]
    served: Series = {**parse(scrape(reports, "budget")), **parse(scrape(reports, "budget", core_device_label=False))}
    # neuron_monitor_daemon_error is served only while the daemon says it cannot see part of the host
    blind = copy.deepcopy(shared)
    blind["neuron_monitor"]["error"] = "Neuron applications not listed: neuron0: opening it failed: Permission denied"
    served.update(parse(scrape([blind, {**blind, "report_time": blind["report_time"] + 1}], "budget")))
    checked = 0
    for where, expr in queries():
        for name, want in selectors(expr):
            if name in FROM_PROMETHEUS or ":" in name:
                continue  # Prometheus's own series, recording rules
            candidates = [(n, lab) for n, lab in served if (not name or n == name)]
            assert any(matches(lab, n, want) for n, lab in candidates), f"{where}: {name}{want} is not served"
            checked += 1
    assert checked >= 80, checked
