"""The source layer sits below the groups: neuron/, host/ and util/ import nothing from groups/ or above.

A reader of a source raises `neuron_monitor.util.errors.GroupError` (the groups re-export it from groups/base.py),
so a source never needs the group contract. Checked on the modules' static imports (ast), not by importing them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import neuron_monitor

PACKAGE = Path(neuron_monitor.__file__).parent
SOURCE_LAYER = ("neuron", "host", "util")
ABOVE = ("neuron_monitor.groups", "neuron_monitor.daemon", "neuron_monitor.exporters", "neuron_monitor.sim")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_the_source_layer_imports_nothing_above_it() -> None:
    bad = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for package in SOURCE_LAYER
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for name in _imports(path)
        if any(name == up or name.startswith(up + ".") for up in ABOVE)
    ]
    assert not bad, bad


def test_group_error_is_one_class_wherever_it_is_imported_from() -> None:
    from neuron_monitor.groups import base
    from neuron_monitor.util import errors

    assert base.GroupError is errors.GroupError
