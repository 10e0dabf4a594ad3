"""The docs agree with the shipped files (issue 43 item 4): the probes docs/running.md names are the DaemonSet's,
every doc has its own title, and no doc calls configs/monitor.conf AWS's default (it lists three groups AWS's tool
does not have). The README's `make run` sample is checked against a real run in tests/test_make_run.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))


def _exporter_probes() -> dict[str, str]:
    for doc in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "daemonset.yaml").read_text()):
        if doc and doc.get("kind") == "DaemonSet":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "exporter":
                    return {k: c[k]["httpGet"]["path"] for k in ("livenessProbe", "readinessProbe")}
    raise AssertionError("no exporter container in deploy/kubernetes/daemonset.yaml")


def test_running_md_names_the_daemonsets_probes() -> None:
    probes = _exporter_probes()
    text = (REPO / "docs" / "running.md").read_text()
    said = re.search(r"liveness probe asks for `([^`]+)`.*?readiness probe asks for `([^`]+)`", text, re.S)
    assert said is not None, "docs/running.md no longer says which paths the probes ask for"
    assert (said.group(1), said.group(2)) == (probes["livenessProbe"], probes["readinessProbe"])
    health = (REPO / "docs" / "health.md").read_text()
    assert f"uses `{probes['livenessProbe']}` as the exporter's\nliveness probe" in health


def test_every_doc_has_its_own_title() -> None:
    titles: dict[str, str] = {}
    for path in DOCS:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# "), f"{path.name}: the first line is not a title"
        assert first not in titles, f"{path.name} and {titles.get(first)} share the title {first!r}"
        titles[first] = path.name


def test_no_doc_calls_the_shipped_monitor_conf_awss_default() -> None:
    for path in [*DOCS, REPO / "README.md"]:
        for paragraph in path.read_text().split("\n\n"):
            for sentence in re.split(r"(?<=\.)\s", paragraph):
                if "configs/monitor.conf" in sentence:
                    assert not re.search(r"AWS's (documented )?default (spelled|written)", sentence), (
                        path.name,
                        sentence,
                    )
