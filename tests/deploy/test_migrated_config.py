"""An AWS-only monitor.conf keeps the health features (issue 43 item 3): the daemon adds neuron_device_health,
efa_counters and neuron_device_telemetry and says so, or, with --exact-groups, says what is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from neuron_monitor.daemon.added_groups import HEALTH_GROUPS, lacks_health_groups, with_health_groups
from neuron_monitor.daemon.config import load_plan, plan_from_data
from tests.conftest import daemon_cmd

REPO = Path(__file__).resolve().parents[2]

# The configuration in AWS's user guide (the README's example): AWS's seven groups, nothing else.
AWS_GUIDE = {
    "period": "1s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [
                {"type": "neuroncore_counters"},
                {"type": "memory_used"},
                {"type": "neuron_runtime_vcpu_usage"},
                {"type": "execution_stats"},
            ],
        }
    ],
    "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}, {"period": "2s", "type": "neuron_hw_counters"}],
}
# The CloudWatch observability add-on's inline monitorConfig: runtime groups and neuron_hw_counters at 5 s.
ADDON = {
    "period": "5s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}, {"type": "execution_stats"}],
        }
    ],
    "system_metrics": [{"type": "neuron_hw_counters", "period": "5s"}],
}


def _system(plan_groups: tuple[tuple[str, float], ...]) -> dict[str, float]:
    return dict(plan_groups)


def test_aws_guide_config_gets_the_three_groups_at_the_hw_counters_period() -> None:
    plan, note = with_health_groups(plan_from_data(AWS_GUIDE, "aws.conf"))
    system = _system(plan.system_groups)
    assert {g: system[g] for g in HEALTH_GROUPS} == dict.fromkeys(HEALTH_GROUPS, 2.0)
    assert note is not None and note.startswith("note: aws.conf: names only AWS's metric groups")
    assert "--exact-groups" in note and "every 2 s" in note


def test_runtime_only_config_gets_them_at_the_root_period() -> None:
    data = {"period": "10s", "neuron_runtimes": [{"metrics": [{"type": "execution_stats"}]}]}
    plan, note = with_health_groups(plan_from_data(data, "rt.conf"))
    assert _system(plan.system_groups) == dict.fromkeys(HEALTH_GROUPS, 10.0)
    assert note is not None


def test_cloudwatch_addon_config_gets_them() -> None:
    plan, _ = with_health_groups(plan_from_data(ADDON, "monitor.json"))
    assert set(HEALTH_GROUPS) <= set(_system(plan.system_groups))


@pytest.mark.parametrize(
    "data",
    [
        {"system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}]},  # host-only: no Neuron data wanted
        {"system_metrics": [{"type": "neuron_hw_counters"}, {"type": "efa_counters"}]},  # written for this daemon
        {"system_metrics": [], "neuron_runtimes": []},  # nothing at all (its own warning)
        {"period": "5s"},  # every group
    ],
    ids=["host-only", "names-one-of-ours", "nothing", "every-group"],
)
def test_other_configs_are_kept_as_written(data: dict[str, object]) -> None:
    plan = plan_from_data(data, "x.conf")
    assert not lacks_health_groups(plan)
    assert with_health_groups(plan) == (plan, None)


def test_exact_groups_keeps_the_plan_and_says_what_is_missing() -> None:
    plan = plan_from_data(AWS_GUIDE, "aws.conf")
    kept, warning = with_health_groups(plan, exact=True)
    assert kept == plan
    assert warning is not None and warning.startswith("warning: aws.conf: ")
    assert all(g in warning for g in HEALTH_GROUPS) and "alerts" in warning


@pytest.mark.parametrize("path", sorted((REPO / "configs").rglob("*.conf")), ids=lambda p: p.name)
def test_shipped_configs_need_no_addition(path: Path) -> None:
    """Our own configurations say what they collect: none relies on the addition (host-only wants none)."""
    assert not lacks_health_groups(load_plan(str(path)))


@pytest.mark.e2e
@pytest.mark.parametrize("exact", [False, True], ids=["default", "exact-groups"])
def test_daemon_on_an_aws_config(tmp_path: Path, exact: bool) -> None:
    """The real daemon on a simulated host with AWS's guide configuration: the health verdict is in the report and
    stderr says why; with --exact-groups the report has AWS's groups only and stderr says what is missing."""
    conf = tmp_path / "monitor.conf"
    conf.write_bytes(orjson.dumps(AWS_GUIDE))
    args = ["-c", str(conf), "--simulate", "trn1.2xlarge", "--once"] + (["--exact-groups"] if exact else [])
    proc = subprocess.run(daemon_cmd(*args), capture_output=True, cwd=REPO, timeout=120, check=False)
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr[-2000:]
    system = orjson.loads(proc.stdout.splitlines()[-1])["system_data"]
    lines = [line for line in stderr.splitlines() if "names only AWS's metric groups" in line]
    assert len(lines) == 1, stderr[-2000:]
    if exact:
        assert set(system) == {"vcpu_usage", "memory_info", "neuron_hw_counters"}
        assert lines[0].startswith(f"neuron-monitor: warning: {conf}: ")
    else:
        assert set(HEALTH_GROUPS) <= set(system)
        assert system["neuron_device_health"]["node"]["state"] == "healthy"
        assert lines[0].startswith(f"neuron-monitor: note: {conf}: ")


def test_the_image_entrypoint_keeps_awss_groups_unless_asked() -> None:
    """AWS's entrypoint is started by AWS's DaemonSets with AWS's configuration (the CloudWatch agent scraping
    them bills every neuron* series and attributes per-core series by label): exactly AWS's groups by default,
    ours added with --health-groups."""
    from neuron_monitor.daemon.entrypoint import build_pipeline, parse_args

    plain = build_pipeline(parse_args(["--neuron-monitor-config", "m.json"]), {}, python="py")
    assert "--exact-groups" in plain.daemon
    asked = build_pipeline(parse_args(["--neuron-monitor-config", "m.json", "--health-groups"]), {}, python="py")
    assert "--exact-groups" not in asked.daemon
