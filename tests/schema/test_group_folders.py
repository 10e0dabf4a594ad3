"""Every metric group is one folder (docs/architecture.md, Layout): ``neuron_monitor/groups/<name>/`` holds its
``__init__.py``, ``collector.py`` (``GROUP``), ``spec.py`` (``SPEC`` named after the folder) and a README that names
every Prometheus family and CloudWatch metric of the spec, so the README cannot fall behind the spec."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS
from neuron_monitor.schema.spec import COUNTER, registry

GROUPS = Path(__file__).resolve().parents[2] / "neuron_monitor" / "groups"
NAMES = sorted(p.name for p in GROUPS.iterdir() if (p / "spec.py").exists())


def test_every_group_folder_is_a_registered_group_and_back() -> None:
    assert sorted((*SYSTEM_GROUPS, *RUNTIME_GROUPS)) == NAMES
    assert sorted(spec.name for spec in registry().all()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_group_folder_holds_collector_spec_and_readme(name: str) -> None:
    folder = GROUPS / name
    for part in ("__init__.py", "collector.py", "spec.py", "README.md"):
        assert (folder / part).is_file(), f"groups/{name}/{part} is missing"
    collector = importlib.import_module(f"neuron_monitor.groups.{name}.collector")
    assert collector.GROUP.type_name == name
    spec = importlib.import_module(f"neuron_monitor.groups.{name}.spec").SPEC
    assert spec.name == name
    readme = (folder / "README.md").read_text()
    assert f"`{name}`" in readme.splitlines()[0]
    prom = [f.name + ("_total" if f.kind == COUNTER else "") for f in spec.prometheus]
    missing = [n for n in prom if not _named(readme, n)]
    assert not missing, f"groups/{name}/README.md does not name {missing}"
    missing = [m.name for m in spec.cloudwatch if not _named(readme, m.name)]
    assert not missing, f"groups/{name}/README.md does not name {missing}"


def _named(readme: str, name: str) -> bool:
    """``name`` appears in the README, or a family of many counters is named by its pattern (efa_<counter>_total
    for the 22 counters of the kernel's EFA driver, the CloudWatch agent's efa_<counter> names)."""
    if name in readme:
        return True
    if name.startswith("efa_"):
        return ("efa_<counter>_total" if name.endswith("_total") else "CloudWatch agent's EFA names") in readme
    return False
