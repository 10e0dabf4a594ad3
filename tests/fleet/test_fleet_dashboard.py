"""The fleet dashboard (dashboards/neuron-fleet.json): generated file up to date, links to the node dashboard, every
query reads the fleet roll-ups or series the exporter serves under the default budget (the harness test runs them
against a central Prometheus; tests/fleet/test_series_budget.py checks their raw series)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "dashboards" / "neuron-fleet.json"
NODE = REPO / "dashboards" / "neuron-monitor.json"
RULES = REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml"


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location(
        "build_fleet_dashboard", REPO / "dashboards" / "build_fleet_dashboard.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_json_matches_the_builder() -> None:
    assert FLEET.read_text() == _builder().render(), "run python3 dashboards/build_fleet_dashboard.py"


def test_fleet_links_to_the_node_dashboard_with_the_node_selected() -> None:
    doc, node = json.loads(FLEET.read_text()), json.loads(NODE.read_text())
    assert doc["uid"] != node["uid"]
    assert any(f"/d/{node['uid']}/" in link["url"] for link in doc["links"])
    tables = [p for p in doc["panels"] if p["type"] == "table"]
    linked = [
        p for p in tables
        for o in p["fieldConfig"]["overrides"]
        for prop in o["properties"]
        if prop["id"] == "links" and any(f"/d/{node['uid']}/" in v["url"] and "var-instance=" in v["url"]
                                         for v in prop["value"])
    ]  # fmt: skip
    assert len(linked) >= 4
    # the node dashboard's $instance variable takes the target label the fleet tables show
    assert "instance" in {v["name"] for v in node["templating"]["list"]}


def test_every_recording_rule_the_dashboard_reads_exists() -> None:
    doc = json.loads(FLEET.read_text())
    recorded = {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r}
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    used = {m for e in exprs for m in re.findall(r"\b([a-z_]+:[a-z_]+:[a-z_0-9]+)\b", e)}
    assert len(used) >= 8
    assert used <= recorded, used - recorded
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert [r.split(" ")[0] for r in rows] == ["Fleet", "Nodes", "Devices"]  # fleet -> node -> device
