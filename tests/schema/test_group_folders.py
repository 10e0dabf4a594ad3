"""Every metric group is one folder (docs/architecture.md, Layout): ``neuron_monitor/groups/<name>/`` holds its
``__init__.py``, ``collector.py`` (``GROUP``), ``spec.py`` (``SPEC`` named after the folder) and a README that names
every Prometheus family and CloudWatch metric of the spec, so the README cannot fall behind the spec; its sample
config is valid and the shipped config lists the group; ``testdata/`` holds captured real-format data and a README."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from neuron_monitor.daemon.config import plan_from_data_careful
from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS
from neuron_monitor.schema.spec import COUNTER, registry

REPO = Path(__file__).resolve().parents[2]
GROUPS = REPO / "neuron_monitor" / "groups"
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


@pytest.mark.parametrize("name", NAMES)
def test_readme_sample_config_is_valid_and_testdata_is_there(name: str) -> None:
    folder = GROUPS / name
    readme = (folder / "README.md").read_text()
    (sample,) = re.findall(r"```json\n(.*?)\n```", readme, re.S)
    plan = plan_from_data_careful(json.loads(sample), f"groups/{name}/README.md")
    enabled = [g for g, _ in plan.system_groups] + [g for s in plan.runtime_scopes for g, _ in s.groups]
    assert enabled == [name]
    assert f'"{name}"' in (REPO / "configs" / "monitor.conf").read_text()  # "the shipped configurations list it"
    testdata = sorted(p.name for p in (folder / "testdata").iterdir())
    assert "README.md" in testdata and len(testdata) > 1, f"groups/{name}/testdata/ holds no data"
    assert all(f"`{f}`" in readme for f in testdata if f != "README.md"), f"groups/{name}/README.md: test data"
