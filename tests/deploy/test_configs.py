"""Every shipped monitor.conf loads with the real config loader and means what its name says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from neuron_monitor.daemon.config import default_plan, load_plan
from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
ALL = sorted(CONFIGS.rglob("*.conf"))


def test_there_are_configs() -> None:
    names = {p.name for p in ALL}
    assert {"monitor.conf", "low-overhead.conf", "high-frequency-debug.conf"} <= names
    assert {"per-application-tags.conf", "host-only.conf"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_each_config_loads(path: Path) -> None:
    plan = load_plan(str(path))
    assert plan.system_groups or plan.runtime_scopes


def test_monitor_conf_is_the_documented_default() -> None:
    plan = load_plan(str(CONFIGS / "monitor.conf"))
    default = default_plan()
    assert sorted(plan.system_groups) == sorted(default.system_groups)
    assert len(plan.runtime_scopes) == 1
    assert plan.runtime_scopes[0].tag_filter.pattern == ".*"
    assert sorted(plan.runtime_scopes[0].groups) == sorted(default.runtime_scopes[0].groups)


def test_low_overhead_collects_less_often_than_the_default() -> None:
    plan = load_plan(str(CONFIGS / "examples" / "low-overhead.conf"))
    assert plan.smallest_period() >= 15
    assert "neuron_runtime_vcpu_usage" not in dict(plan.runtime_scopes[0].groups)


def test_high_frequency_debug_is_subsecond_and_complete() -> None:
    plan = load_plan(str(CONFIGS / "examples" / "high-frequency-debug.conf"))
    assert plan.smallest_period() == 0.5
    assert {g for g, _ in plan.system_groups} == set(SYSTEM_GROUPS)
    assert {g for g, _ in plan.runtime_scopes[0].groups} == set(RUNTIME_GROUPS)


def test_per_application_tags_route_tags_to_their_entry() -> None:
    plan = load_plan(str(CONFIGS / "examples" / "per-application-tags.conf"))
    train, infer, rest = (plan.scope_for_tag(t) for t in ("train-llama", "serve-bert", "12345"))
    assert train is not None and infer is not None and rest is not None
    assert (train.index, infer.index, rest.index) == (0, 1, 2)
    assert dict(train.groups)["neuroncore_counters"] == 1.0
    assert dict(train.groups)["memory_used"] == 10.0
    assert set(dict(infer.groups)) == {"neuroncore_counters", "execution_stats"}
    assert dict(rest.groups) == {"memory_used": 30.0}


def test_host_only_has_no_neuron_groups() -> None:
    plan = load_plan(str(CONFIGS / "examples" / "host-only.conf"))
    assert plan.runtime_scopes == ()
    assert {g for g, _ in plan.system_groups} == {"vcpu_usage", "memory_info"}


@pytest.mark.e2e
def test_daemon_accepts_host_only_config_and_reports_host_groups(tmp_path: Path) -> None:
    """The shipped host-only config through the real daemon, one report, against this machine's /proc."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_monitor.daemon.cli",
            "-c",
            str(CONFIGS / "examples" / "host-only.conf"),
            "--once",
        ],
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    report = orjson.loads(proc.stdout.splitlines()[-1])
    assert report["system_data"]["memory_info"]["memory_total_bytes"] > 0
    assert report["neuron_runtime_data"] == []
