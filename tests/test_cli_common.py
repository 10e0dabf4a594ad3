"""The commands' shared conventions: --verbose/--log-level, defaults in --help, the called name; rate-limited logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name
from neuron_monitor.util.ratelimit import LogRateLimit, held_back

VENV_BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("text", "level"), [("0", 0), ("4", 4), ("info", 3), ("DEBUG", 4), ("warning", 2)])
def test_verbose_and_log_level_are_one_option(text: str, level: int) -> None:
    p = ArgumentParser("neuron-monitor-x")
    add_verbosity(p, default=2)
    assert p.parse_args(["--verbose", text]).verbose == level
    assert p.parse_args(["--log-level", text]).verbose == level
    assert p.parse_args([]).verbose == 2


def test_a_bad_level_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    p = ArgumentParser("neuron-monitor-x")
    add_verbosity(p, default=2)
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--verbose", "9"])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_help_shows_defaults_once() -> None:
    p = ArgumentParser("neuron-monitor-x")
    p.add_argument("--port", type=int, default=8000, help="port")
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--size", default="1", help="size (default 1)")
    text = p.format_help()
    assert "port (default: 8000)" in text and "seed (default: 0)" in text
    assert "(default 1) (default" not in text


def test_help_names_no_empty_default() -> None:
    p = ArgumentParser("neuron-monitor-x")
    p.add_argument("--cluster-name", default="", help="ClusterName dimension")
    p.add_argument("--header", action="append", default=[], help="a header")
    assert "(default: )" not in p.format_help() and "(default: [])" not in p.format_help()


@pytest.mark.parametrize(
    "command",
    sorted(p.name for p in VENV_BIN.glob("neuron-monitor*") if not p.name.endswith(".py")),
)
def test_no_command_help_shows_an_empty_default(command: str) -> None:
    """Every installed command's --help: no "(default: )", "(default: [])" or "(default: None)" (issue 43)."""
    got = subprocess.run([str(VENV_BIN / command), "--help"], capture_output=True, text=True, timeout=60,
                         env={"COLUMNS": "200", "PATH": str(VENV_BIN)})  # fmt: skip
    assert got.returncode == 0, got.stderr
    for empty in ("(default: )", "(default: [])", "(default: None)", "(default: '')"):
        assert empty not in got.stdout, (command, [ln for ln in got.stdout.splitlines() if empty in ln])


def test_called_name_keeps_the_py_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/bin/neuron-monitor-prometheus.py"])
    assert called_name("neuron-monitor-prometheus") == "neuron-monitor-prometheus.py"
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/pytest"])
    assert called_name("neuron-monitor-prometheus") == "neuron-monitor-prometheus"


@pytest.mark.e2e
@pytest.mark.parametrize("alias", ["neuron-monitor-prometheus.py", "neuron-monitor-cloudwatch.py"])
def test_the_py_aliases_print_their_own_name(alias: str) -> None:
    script = VENV_BIN / alias
    if not script.exists():
        pytest.skip(f"{alias} is not installed in this environment")
    proc = subprocess.run([str(script), "--verbose", "loud"], capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith(f"{alias}: ")


def test_rate_limit_lets_one_message_out_per_interval_and_counts_the_rest() -> None:
    now = [0.0]
    limit = LogRateLimit(60.0, clock=lambda: now[0])
    assert limit.hit() == 1
    assert limit.hit() is None and limit.hit() is None
    now[0] = 61.0
    n = limit.hit()
    assert n == 3 and held_back(n, "bad lines") == " (2 more bad lines since the last message)"
    assert held_back(1, "bad lines") == ""
