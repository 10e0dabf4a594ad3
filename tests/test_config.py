"""monitor.conf: period parsing, inheritance, defaults, and the bad-config catalogue through the real CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.daemon.config import NO_GROUP_WARNING, load_plan, plan_from_data, plan_warnings
from neuron_monitor.daemon.config_values import ConfigError, parse_period
from neuron_monitor.groups.registry import RUNTIME_GROUPS, SYSTEM_GROUPS
from tests.conftest import REPO, daemon_cmd


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("1s", 1.0), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0), ("1.5s", 1.5), ("250000us", 0.25)],
)
def test_parse_period(text: str, seconds: float) -> None:
    assert parse_period(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", "-1s", "0s", "1ms", "s", "1s2", "25h", "1 s"])
def test_parse_period_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_period(text)


@given(ms=st.integers(min_value=10, max_value=86_400_000))
def test_parse_period_milliseconds_roundtrip(ms: int) -> None:
    assert parse_period(f"{ms}ms") == pytest.approx(ms / 1000)


@given(m=st.integers(0, 59), s=st.integers(1, 59))
def test_parse_period_compound(m: int, s: int) -> None:
    assert parse_period(f"{m}m{s}s") == pytest.approx(60 * m + s)


def test_default_plan_is_every_group_at_5s() -> None:
    plan = load_plan(None)
    assert {g for g, _ in plan.system_groups} == set(SYSTEM_GROUPS)
    assert {g for g, _ in plan.runtime_scopes[0].groups} == set(RUNTIME_GROUPS)
    assert {p for _, p in plan.system_groups} == {5.0}
    assert plan.scope_for_tag("anything") is plan.runtime_scopes[0]


def test_period_inheritance_metric_over_entry_over_root() -> None:
    plan = plan_from_data(
        {
            "period": "2s",
            "neuron_runtimes": [
                {
                    "tag_filter": "^train",
                    "period": "500ms",
                    "metrics": [{"type": "execution_stats"}, {"type": "memory_used", "period": "10s"}],
                },
                {"tag_filter": ".*", "metrics": [{"type": "neuroncore_counters"}]},
            ],
            "system_metrics": [{"type": "vcpu_usage"}, {"type": "neuron_hw_counters", "period": "1m"}],
        },
        "x.conf",
    )
    assert dict(plan.system_groups) == {"vcpu_usage": 2.0, "neuron_hw_counters": 60.0}
    assert dict(plan.runtime_scopes[0].groups) == {"execution_stats": 0.5, "memory_used": 10.0}
    assert dict(plan.runtime_scopes[1].groups) == {"neuroncore_counters": 2.0}
    assert plan.scope_for_tag("train-7").index == 0
    assert plan.scope_for_tag("serve").index == 1  # first matching entry wins


def test_no_period_anywhere_is_5s() -> None:
    plan = plan_from_data({"system_metrics": [{"type": "memory_info"}]}, "x")
    assert plan.system_groups == (("memory_info", 5.0),)


def test_period_only_config_is_every_group_at_that_period() -> None:
    """`{"period": "1s"}` means "everything, every second": the same groups as no file, at the file's period."""
    plan = plan_from_data({"period": "1s"}, "p.conf")
    default = load_plan(None)
    assert [g for g, _ in plan.system_groups] == [g for g, _ in default.system_groups]
    assert [g for g, _ in plan.runtime_scopes[0].groups] == [g for g, _ in default.runtime_scopes[0].groups]
    assert {p for _, p in plan.system_groups} == {p for _, p in plan.runtime_scopes[0].groups} == {1.0}
    assert plan.scope_for_tag("any-tag") is plan.runtime_scopes[0]
    assert not plan.enables_no_group() and plan_warnings(plan) == []
    assert plan_from_data({}, "e.conf").system_groups == default.system_groups  # an empty object: defaults


@pytest.mark.parametrize(
    "data",
    [
        {"period": "1s", "system_metrics": []},
        {"neuron_runtimes": []},
        {"neuron_runtimes": [{"tag_filter": ".*", "metrics": []}], "system_metrics": []},
    ],
)
def test_lists_that_name_no_group_collect_nothing_and_warn(data: dict[str, object]) -> None:
    plan = plan_from_data(data, "n.conf")
    assert plan.enables_no_group()
    assert plan_warnings(plan) == [f"n.conf: {NO_GROUP_WARNING}"]
    assert "this configuration enables no metric group" in NO_GROUP_WARNING


def test_one_listed_group_is_not_a_warning() -> None:
    plan = plan_from_data({"system_metrics": [{"type": "memory_info"}]}, "x")
    assert plan_warnings(plan) == [] and plan.runtime_scopes == ()


def test_daemon_warns_on_stderr_about_a_config_without_groups(tmp_path: Path) -> None:
    conf = tmp_path / "none.conf"
    conf.write_text('{"period": "1s", "system_metrics": [], "neuron_runtimes": []}')
    proc = subprocess.run(
        daemon_cmd("-c", str(conf), "--once", "--no-imds"), cwd=REPO, capture_output=True, timeout=120
    )
    assert proc.returncode == 0
    assert proc.stderr.decode().splitlines() == [f"neuron-monitor: warning: {conf}: {NO_GROUP_WARNING}"]
    assert len([line for line in proc.stdout.splitlines() if line.strip()]) == 1  # (after the resync newline)


def test_legacy_address_key_is_accepted() -> None:
    plan_from_data({"neuron_runtimes": [{"address": "unix:/run/neuron.sock", "metrics": []}]}, "x")


def test_aws_guide_example_loads() -> None:
    conf = {
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
        "system_metrics": [
            {"type": "vcpu_usage"},
            {"type": "memory_info"},
            {"period": "2s", "type": "neuron_hw_counters"},
        ],
    }
    plan = plan_from_data(conf, "monitor.conf")
    assert dict(plan.system_groups)["neuron_hw_counters"] == 2.0


# (file content, expected JSON path or phrase in the one line)
BAD_CONFIGS: list[tuple[str, str]] = [
    ("{", "invalid JSON"),
    ("", "file is empty"),
    ("[]", "(root): expected a JSON object"),
    ('{"perod": "1s"}', "perod: unknown key"),
    ('{"period": 5}', "period: expected a duration string"),
    ('{"period": "fast"}', "period: invalid duration"),
    ('{"period": "-1s"}', "period: period must be positive"),
    ('{"period": "0s"}', "period: period must be positive"),
    ('{"period": "1ms"}', "below the minimum"),
    ('{"system_metrics": [{"type": "foo"}]}', 'system_metrics[0].type: unknown metric group "foo" (known:'),
    ('{"system_metrics": [{"period": "1s"}]}', "system_metrics[0].type: required key is missing"),
    ('{"system_metrics": [{"type": "memory_used"}]}', "belongs there"),
    ('{"system_metrics": {"type": "vcpu_usage"}}', "system_metrics: expected an array"),
    ('{"system_metrics": [{"type": "vcpu_usage"}, {"type": "vcpu_usage"}]}', "system_metrics[1].type: metric group"),
    ('{"neuron_runtimes": [{"tag_filter": "(", "metrics": []}]}', "neuron_runtimes[0].tag_filter: invalid regular"),
    ('{"neuron_runtimes": [{"tag_filter": 7}]}', "neuron_runtimes[0].tag_filter: expected a string"),
    (
        '{"neuron_runtimes": [{"metrics": [{"type": "execution_stats"}, {"type": "foo"}]}]}',
        'neuron_runtimes[0].metrics[1].type: unknown metric group "foo"',
    ),
    ('{"neuron_runtimes": [{"metrics": [{"type": "vcpu_usage"}]}]}', "neuron_runtimes[0].metrics[0].type"),
    ('{"neuron_runtimes": [{"metrics": [{"type": "memory_used", "period": "2d"}]}]}', "metrics[0].period: invalid"),
    ('{"neuron_runtimes": ["x"]}', "neuron_runtimes[0]: expected an object"),
    ('{"neuron_runtimes": [{"metrics": [{"type": "memory_used", "extra": 1}]}]}', "metrics[0].extra: unknown key"),
    ('{"period": "48h"}', "above the maximum"),
]


@pytest.mark.parametrize(("content", "expected"), BAD_CONFIGS, ids=[e for _, e in BAD_CONFIGS])
def test_bad_config_in_process(tmp_path: Path, content: str, expected: str) -> None:
    f = tmp_path / "monitor.conf"
    f.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_plan(str(f))
    line = str(info.value)
    assert line.startswith(f"{f}: ")
    assert expected in line
    assert "\n" not in line


@pytest.mark.e2e
def test_bad_config_catalogue_through_the_cli(tmp_path: Path) -> None:
    """Every mistake: exit code 2, exactly one stderr line naming file, path and problem, nothing on stdout."""
    procs = []
    for i, (content, expected) in enumerate(BAD_CONFIGS):
        f = tmp_path / f"bad{i}.conf"
        f.write_text(content)
        cmd = daemon_cmd("-c", str(f), "--no-imds")
        procs.append((subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE), f, expected))
    missing = subprocess.Popen(
        daemon_cmd("-c", str(tmp_path / "nope.conf")), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    procs.append((missing, tmp_path / "nope.conf", "no such file"))
    directory = subprocess.Popen(
        daemon_cmd("-c", str(tmp_path)), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    procs.append((directory, tmp_path, "is a directory"))
    assert len(procs) >= 15
    for proc, f, expected in procs:
        out, err = proc.communicate(timeout=60)
        lines = err.decode().splitlines()
        assert proc.returncode == 2, (f, err)
        assert out == b""
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"neuron-monitor: {f}: ")
        assert expected in lines[0]
        assert "Traceback" not in lines[0]


@pytest.mark.e2e
def test_bad_arguments_exit_2_one_line() -> None:
    proc = subprocess.run(daemon_cmd("--verbose", "9"), cwd=REPO, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.decode().splitlines()) == 1
