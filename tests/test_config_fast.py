"""The config fast path (`plan_from_data_fast`) against its careful twin (the pydantic models): same plan, or
None where the careful path decides; the daemon's start-up does not import pydantic."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.daemon.config import Plan, plan_from_data, plan_from_data_careful, plan_from_data_fast
from neuron_monitor.daemon.config_values import ConfigError

REPO = Path(__file__).resolve().parent.parent

VALID: list[Any] = [
    {},
    {"period": "1s"},
    {"period": "100ms", "neuron_runtimes": [], "system_metrics": []},
    {"system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info", "period": "2s"}]},
    {"neuron_runtimes": [{"tag_filter": "^a", "period": "1m30s", "metrics": [{"type": "memory_used"}]}]},
    {
        "period": "2s",
        "neuron_runtimes": [
            {"tag_filter": ".*", "metrics": [{"type": "neuroncore_counters", "period": "500ms"}]},
            {"address": "unix:/run/x", "metrics": [{"type": "execution_stats"}, {"type": "memory_used"}]},
            {"tag_filter": "x", "period": None},
        ],
        "system_metrics": [{"type": "neuron_hw_counters", "period": None}],
    },
]
BAD_VALUES: list[Any] = [None, 1, 1.5, True, "", "0s", "-1s", "5", "1d", "1s", [], {}, [{}], "(", [{"type": 3}]]
BAD: list[Any] = [
    {"perod": "1s"},
    {"system_metrics": [{"type": "memory_used"}]},
    {"system_metrics": [{"type": "nope"}]},
    {"system_metrics": [{"type": "vcpu_usage"}, {"type": "vcpu_usage"}]},
    {"neuron_runtimes": [{"metrics": [{"type": "vcpu_usage"}]}]},
    {"neuron_runtimes": [{"metrics": [{"type": "memory_used", "extra": 1}]}]},
    {"neuron_runtimes": [{"metrics": [{"period": "1s"}]}]},
]
for key, value in itertools.product(("period", "neuron_runtimes", "system_metrics"), BAD_VALUES):
    BAD.append({key: value})
for key, value in itertools.product(("tag_filter", "period", "metrics", "address"), BAD_VALUES):
    BAD.append({"neuron_runtimes": [{key: value}]})
for key, value in itertools.product(("type", "period"), BAD_VALUES):
    BAD.append({"system_metrics": [{"type": "vcpu_usage", key: value}]})


def _careful(data: Any) -> Plan | str:
    try:
        return plan_from_data_careful(data, "f.conf")
    except ConfigError as e:
        return str(e)


def _shipped() -> list[Any]:
    return [json.loads(p.read_text()) for p in sorted((REPO / "configs").rglob("*.conf"))]


@pytest.mark.parametrize("data", VALID + BAD + _shipped(), ids=lambda d: json.dumps(d)[:60])
def test_fast_path_gives_the_careful_plan_or_defers(data: Any) -> None:
    careful = _careful(data)
    fast = plan_from_data_fast(data, "f.conf")
    assert fast is None or fast == careful
    try:
        combined: Plan | str = plan_from_data(data, "f.conf")
    except ConfigError as e:
        combined = str(e)
    assert combined == careful


@pytest.mark.parametrize("data", VALID + _shipped(), ids=lambda d: json.dumps(d)[:60])
def test_well_formed_configs_take_the_fast_path(data: Any) -> None:
    assert isinstance(_careful(data), Plan)
    assert plan_from_data_fast(data, "f.conf") is not None


def test_daemon_start_up_does_not_import_pydantic() -> None:
    code = "import sys, neuron_monitor.daemon.cli; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
