"""The alerting rules (deploy/prometheus/): promtool check and unit tests, what every alert must carry, the
runbooks in docs/alerts.md, and the generated PrometheusRule manifest staying identical to the rules file."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "deploy" / "prometheus"
RULES = RULES_DIR / "neuron-monitor.rules.yml"
TESTS = sorted((RULES_DIR / "tests").glob("*.yml"))
MANIFEST = REPO / "deploy" / "kubernetes" / "prometheusrule.yaml"
RUNBOOK = REPO / "docs" / "alerts.md"
RUNBOOK_BASE = "https://neuron-monitor.example/docs/alerts.md#"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
needs_promtool = pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool (Debian package prometheus) missing")

sys.path.insert(0, str(RULES_DIR))
import build_prometheusrule  # noqa: E402


def groups() -> list[dict[str, Any]]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return list(data["groups"])


def alerts() -> list[dict[str, Any]]:
    return [r for g in groups() for r in g["rules"] if "alert" in r]


@needs_promtool
def test_promtool_check_rules_is_clean() -> None:
    out = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout and "WARNING" not in out.stdout + out.stderr


@needs_promtool
@pytest.mark.parametrize("test_file", TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(test_file: Path) -> None:
    out = subprocess.run(
        [PROMTOOL, "test", "rules", test_file.name], cwd=test_file.parent, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_the_example_prometheus_config_loads_the_rules(tmp_path: Path) -> None:
    """dashboards/provisioning/prometheus.yml as its comment says to use it, the rules file copied next to it:
    promtool accepts it, it loads the rules (the alerts and the fleet roll-ups the dashboards read) and its job is
    the one NeuronExporterDown reads. Before (found 2026-11-29) it had no rule_files: the dashboards' alert panel
    and the fleet dashboard stayed empty on a Prometheus set up from it."""
    example = REPO / "dashboards" / "provisioning" / "prometheus.yml"
    shutil.copy(example, tmp_path / "prometheus.yml")
    shutil.copy(RULES, tmp_path / RULES.name)
    config = yaml.safe_load(example.read_text())
    assert config.get("rule_files") == [RULES.name]
    assert [job["job_name"] for job in config["scrape_configs"]] == ["neuron-monitor"]
    out = subprocess.run(
        [PROMTOOL, "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr
    assert f"{len([r for g in groups() for r in g['rules']])} rules found" in out.stdout, out.stdout


@needs_promtool
def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """A wrong expectation makes promtool fail: the unit tests are not vacuous."""
    broken = (RULES_DIR / "tests" / "pipeline.yml").read_text().replace("severity: warning", "severity: page", 1)
    (tmp_path / "pipeline.yml").write_text(broken.replace("../neuron-monitor.rules.yml", str(RULES)))
    out = subprocess.run([PROMTOOL, "test", "rules", "pipeline.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


def test_every_alert_has_severity_summary_description_and_runbook() -> None:
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", m.group(1).strip().lower()).replace(" ", "-")
        for m in re.finditer(r"^#+ (.+)$", RUNBOOK.read_text(), flags=re.M)
    }
    names = [a["alert"] for a in alerts()]
    assert len(names) == len(set(names)) >= 16
    for rule in alerts():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        ann = rule["annotations"]
        assert set(ann) == {"summary", "description", "runbook_url"}, rule["alert"]
        assert "$labels.instance" in ann["summary"], rule["alert"]
        assert ann["runbook_url"] == RUNBOOK_BASE + rule["alert"].lower()
        assert rule["alert"].lower() in anchors, f"docs/alerts.md has no section {rule['alert']}"


def test_alerts_name_the_device_core_or_runtime_they_are_about() -> None:
    for rule in alerts():
        text = rule["annotations"]["summary"] + rule["annotations"]["description"]
        if rule["alert"].startswith(("NeuronExecution", "NeuronRuntime")):
            assert "$labels.runtime_tag" in text, rule["alert"]
        if rule["alert"].startswith("NeuronDevice"):
            assert "$labels.neuron_device_index" in text and "Runtimes on this device" in text, rule["alert"]
        if rule["alert"].startswith("NeuronCore"):
            assert "$labels.neuroncore" in text and "$labels.runtime_tag" in text, rule["alert"]


def test_every_alert_is_unit_tested_firing_and_silent() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {a["alert"] for a in alerts()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested silent"


def test_prometheusrule_manifest_is_generated_from_the_rules_file() -> None:
    regenerate = "run python3 deploy/prometheus/build_prometheusrule.py"
    assert MANIFEST.read_text() == build_prometheusrule.render(), regenerate
    assert yaml.safe_load(MANIFEST.read_text())["spec"]["groups"] == groups()


# monitoring.coreos.com/v1 PrometheusRule, as the Prometheus Operator's API reference documents it: spec.groups[]
# with name, interval, rules[] of record|alert, expr, for, labels, annotations.
RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expr"],
    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
    "properties": {
        "record": {"type": "string", "pattern": r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
        "alert": {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9]*$"},
        "expr": {"type": "string", "minLength": 1},
        "for": {"type": "string", "pattern": r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": {"type": "object"}},
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string"},
                            "interval": {"type": "string"},
                            "rules": {"type": "array", "items": RULE_SCHEMA},
                        },
                    },
                }
            },
        },
    },
}


def test_prometheusrule_matches_documented_schema_and_is_listed_in_kustomization() -> None:
    doc = yaml.safe_load(MANIFEST.read_text())
    jsonschema.validate(doc, PROMETHEUS_RULE_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        no_expr = {**doc, "spec": {"groups": [{"name": "x", "rules": [{"alert": "A"}]}]}}
        jsonschema.validate(no_expr, PROMETHEUS_RULE_SCHEMA)
    kust = yaml.safe_load((MANIFEST.parent / "kustomization.yaml").read_text())
    assert MANIFEST.name in kust["resources"]
    namespace = yaml.safe_load((MANIFEST.parent / "namespace.yaml").read_text())["metadata"]["name"]
    assert doc["metadata"]["namespace"] == namespace


def test_build_script_check_mode_detects_a_stale_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "prometheusrule.yaml"
    stale.write_text(build_prometheusrule.render().replace("severity: critical", "severity: warning", 1))
    monkeypatch.setattr(build_prometheusrule, "MANIFEST", stale)
    monkeypatch.chdir(REPO)
    assert build_prometheusrule.main(["--check"]) == 1
    assert build_prometheusrule.main([]) == 0
    assert build_prometheusrule.main(["--check"]) == 0


NOT_FROM_EXPORTER = {"up"}  # Prometheus's own scrape health
# a trn1.2xlarge has no EFA adapter; tests/fleet/test_series_budget.py finds these on a simulated trn2.48xlarge
EFA = {"efa_tx_pkts_total", "efa_retrans_pkts_total", "efa_impaired_remote_conn_events_total",
       "efa_unresponsive_remote_events_total", "efa_link_up"}  # fmt: skip
KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def _report_of_a_daemon_that_cannot_list_applications(tmp_path: Path) -> dict[str, Any]:
    """The real daemon's report of a trn1.2xlarge tree whose /dev/neuron0 cannot be opened (not a device): its
    ``neuron_monitor.error`` says so, which is what serves ``neuron_monitor_daemon_error``."""
    from tests.neuron.layouts import build

    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")
    (root / "dev").mkdir(exist_ok=True)
    (root / "dev" / "neuron0").write_bytes(b"not a device")
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(root), "--once", "--no-imds"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True)
    report: dict[str, Any] = yaml.safe_load(out.stdout.strip().splitlines()[-1])
    assert report["neuron_monitor"]["error"], "the daemon says it could not list the applications"
    return report


def test_rules_use_the_metric_names_and_label_values_the_real_pipeline_serves(tmp_path: Path) -> None:
    """One report from the real daemon (simulated trn1.2xlarge) through the exporter's code, and one of a host
    where the daemon cannot list the applications: every metric and every label value the rules select on
    exists."""
    from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
    from neuron_monitor.sim.shapes import SHAPES
    from tests.exporters.prometheus.prom_helpers import feed, parse, scrape

    line = (
        subprocess.run(
            [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "trn1.2xlarge", "--once", "--no-imds"],
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        .stdout.strip()
        .splitlines()[0]
    )  # (the first line written is the resync newline)
    report = yaml.safe_load(line)
    # under the default series budget, in both core-label modes (the rules' join through neuroncore_info is for
    # --core-labels aws)
    series = {**parse(scrape(feed([report]))), **parse(scrape(feed([report], ShapeOptions(core_device_label=False))))}
    series.update(parse(scrape(feed([_report_of_a_daemon_that_cannot_list_applications(tmp_path)]))))
    names = {name for name, _ in series}
    metric_like: set[str] = set()
    for rule in (r for g in groups() for r in g["rules"]):
        expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", rule["expr"])  # selectors' label matchers, range windows
        expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # label lists
        expr = re.sub(r'"[^"]*"', "", expr)
        for m in re.finditer(r"(?<![\w:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
            if not m.group(2) and ":" not in m.group(1) and m.group(1) not in KEYWORDS:
                metric_like.add(m.group(1))
    assert {"execution_errors_total", "neuroncore_utilization_ratio", "neuron_exporter_up"} <= metric_like
    missing = metric_like - names - NOT_FROM_EXPORTER - EFA
    assert not missing, f"the exporter serves no {sorted(missing)}"
    sizes: set[int] = set()
    for name, label, values in re.findall(
        r'(?<![\w:])([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-z_]+)=~?"([^"]+)"\}',
        "\n".join(r["expr"] for g in groups() for r in g["rules"]),
    ):
        served = {dict(labels).get(label) for n, labels in series if n == name}
        if label == "neuron_device_memory_size":  # the capacity table: one line per known device size
            sizes.update(int(v) for v in values.split("|"))
            continue
        if name in NOT_FROM_EXPORTER or ":" in name or "repairable" in values:
            continue
        for value in values.split("|"):
            assert value in served, f"{name}{{{label}={value!r}}}: served values {served}"
    served_sizes = {
        int(dict(labels)["neuron_device_memory_size"]) for n, labels in series if n == "neuron_hardware_info"
    }
    assert served_sizes and served_sizes <= sizes
    assert {shape.device_memory for shape in SHAPES.values()} <= sizes, "a simulated device size is not in the table"


def test_every_alert_the_docs_name_exists() -> None:
    """A name in the docs that looks like one of the alerts (Neuron...Errors, ...Unhealthy) is one: an SRE searches
    the rules for it. Before (found 2026-11-29): docs/health.md named "NeuronRuntimeHardwareErrors", which no rule
    defines (the alert is NeuronExecutionHardwareErrors)."""
    names = {a["alert"] for a in alerts()}
    suffix = "|".join(sorted({re.sub(r"^.*?([A-Z][a-z]+)$", r"\1", n) for n in names}))
    pattern = re.compile(rf"\bNeuron[A-Z][A-Za-z]*(?:{suffix})\b")
    wrong = [
        f"{path.relative_to(REPO)}:{i}: {name}"
        for path in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
        for i, line in enumerate(path.read_text().splitlines(), 1)
        for name in pattern.findall(line)
        if name not in names
    ]
    assert not wrong, wrong
