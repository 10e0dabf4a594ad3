"""docs/architecture.md's page on the Prometheus exporter matches the code: every step's file exists, every class,
function or method it names there is defined in one of the files of its row, and every module of the exporter
(but its package and command line) is named on the page."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import neuron_monitor

PACKAGE = Path(neuron_monitor.__file__).parent
EXPORTER = PACKAGE / "exporters" / "prometheus"
DOC = PACKAGE.parent / "docs" / "architecture.md"
SECTION = "## The Prometheus exporter: from a report line to a scrape"


def _section() -> str:
    text = DOC.read_text()
    assert SECTION in text
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _module(name: str) -> Path:
    path = PACKAGE / name if "/" in name else EXPORTER / name
    assert path.is_file(), f"the page names {name}, which does not exist"
    return path


def _defined(path: Path) -> dict[str, set[str]]:
    """Top-level names of a module -> the names defined in each (a class's methods and attributes)."""
    out: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            inner = set()
            if isinstance(node, ast.ClassDef):
                for item in ast.walk(node):
                    if isinstance(item, ast.FunctionDef):
                        inner.add(item.name)
                    targets = item.targets if isinstance(item, ast.Assign) else []
                    if isinstance(item, ast.AnnAssign):
                        targets = [item.target]
                    for target in targets:
                        if isinstance(target, ast.Attribute):
                            inner.add(target.attr)
                        elif isinstance(target, ast.Name):
                            inner.add(target.id)
            out[node.name] = inner
        elif isinstance(node, ast.Assign):
            out.update({t.id: set() for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = set()
    return out


def test_every_name_in_the_steps_table_is_defined_in_its_row_files() -> None:
    rows = [line for line in _section().splitlines() if re.match(r"\| \d\. ", line)]
    assert len(rows) == 8
    for row in rows:
        where = row.rstrip("|").rsplit("|", 1)[1]
        files = re.findall(r"`([\w/]+\.py)`", where)
        assert files, row
        defined: dict[str, set[str]] = {}
        for name in files:
            defined.update(_defined(_module(name)))
        for name in re.findall(r"`([A-Za-z_][\w.]*)`", where):
            if name.endswith(".py"):
                continue
            head, _, attr = name.partition(".")
            assert head in defined, f"{name} (row {row[:14]}) is not defined in {files}"
            assert not attr or attr in defined[head], f"{name} is not defined in {files}"


def test_every_module_of_the_exporter_is_on_the_page() -> None:
    section = _section()
    missing = [
        path.name
        for path in sorted(EXPORTER.glob("*.py"))
        if path.name not in ("__init__.py", "cli.py") and f"`{path.name}`" not in section
    ]
    assert not missing, missing


def test_the_named_places_to_change_exist() -> None:
    from neuron_monitor.exporters.prometheus import collector, labels, process_metrics
    from neuron_monitor.exporters.prometheus.context import ShapeContext
    from neuron_monitor.exporters.prometheus.publish import Publisher

    assert collector.SELF_METRICS.rows and process_metrics.ROWS
    assert set(collector.Seen._fields) == {"view", "state", "stats", "front"}
    assert labels.INSTANCE_LABEL_KEYS and callable(labels.instance_labels)
    assert "inst_names" in ShapeContext.__dataclass_fields__
    assert {"runtime_names", "samples_of", "emit"} <= set(dir(ShapeContext))
    assert "by_scrapes" in vars(Publisher(collector.ExporterState()))
