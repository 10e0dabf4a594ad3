"""The docs' generated parts are what the specs say now (issue 38 item 2): `make docs` changes nothing.

Whoever changes a group's spec runs ``make docs`` (scripts/make_docs.py) and commits what it writes.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.schema import docgen
from neuron_monitor.schema.docgen import REGION, DocError, generate, rewrite
from neuron_monitor.schema.spec import registry

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    REPO / "README.md",
    REPO / "docs" / "prometheus.md",
    REPO / "docs" / "cloudwatch.md",
    *sorted((REPO / "neuron_monitor" / "groups").glob("*/README.md")),
]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_committed_doc_is_what_make_docs_writes(path: Path) -> None:
    text = path.read_text()
    assert REGION.search(text), f"{path.relative_to(REPO)} has no generated part"
    assert rewrite(text) == text, f"{path.relative_to(REPO)} is not current: run `make docs` and commit the result"


def test_every_group_readme_holds_its_own_generated_names() -> None:
    for spec in registry().all():
        readme = (REPO / "neuron_monitor" / "groups" / spec.name / "README.md").read_text()
        assert f"<!-- generated: group-names {spec.name} -->" in readme, spec.name


def test_a_spec_change_shows_as_a_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a help text changed in a spec makes the committed table out of date."""
    real = registry()
    spec = real.get("vcpu_usage")
    assert spec is not None
    changed = dataclasses.replace(
        spec,
        prometheus=(dataclasses.replace(spec.prometheus[0], help="a different help text"), *spec.prometheus[1:]),
        families_by_name={},
    )
    fake = dataclasses.replace(real, system={**real.system, "vcpu_usage": changed})
    monkeypatch.setattr(docgen, "registry", lambda: fake)
    text = (REPO / "docs" / "prometheus.md").read_text()
    assert rewrite(text) != text and "a different help text" in rewrite(text)


def test_every_family_and_metric_of_the_specs_is_in_the_generated_tables() -> None:
    families = generate("prometheus-families")
    metrics = generate("cloudwatch-metrics")
    for spec in registry().all():
        for f in spec.prometheus:
            assert f"`{f.name}" in families
        for m in spec.cloudwatch:
            assert f"`{m.name}" in metrics


def test_an_unknown_part_is_an_error() -> None:
    with pytest.raises(DocError, match="unknown generated part"):
        rewrite("<!-- generated: nonsense -->\n<!-- end generated -->")
    with pytest.raises(DocError, match="no group"):
        generate("group-names nosuchgroup")


def test_make_docs_check_exits_0_on_the_committed_docs() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_docs.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
