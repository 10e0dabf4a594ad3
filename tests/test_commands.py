"""What a new user meets first, command by command: ``--version`` everywhere (one version, the package's metadata),
one-line errors with exit 2 for a missing ``--root``, an unwritable ``--record`` and a mistyped configuration key
(with a suggestion), ``--record`` creating its directory, and det naming itself."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import neuron_monitor
from tests.conftest import REPO, daemon_cmd

COMMANDS = sorted(
    (ep for ep in metadata.entry_points(group="console_scripts") if ep.value.startswith("neuron_monitor.")),
    key=lambda ep: ep.name,
)


def test_every_console_script_is_found() -> None:
    names = {ep.name for ep in COMMANDS}
    assert {"neuron-monitor", "neuron-monitor-sim", "neuron-monitor-prometheus", "neuron-monitor-cloudwatch"} <= names
    assert {"neuron-monitor-trace", "neuron-monitor-det", "neuron-monitor-top"} <= names


def test_the_metadata_version_is_the_packages() -> None:
    assert metadata.version("neuron-monitor") == neuron_monitor.__version__


@pytest.mark.parametrize("ep", COMMANDS, ids=lambda ep: ep.name)
def test_version_on_every_command(
    ep: metadata.EntryPoint, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [f"/usr/local/bin/{ep.name}", "--version"])
    try:
        code = ep.load()()  # a main that returns its code (sys.exit(main()) in the script)
    except SystemExit as e:
        code = e.code
    assert code == 0
    assert capsys.readouterr().out == f"{ep.name} {metadata.version('neuron-monitor')}\n"


def test_version_of_the_image_entrypoint(capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_monitor.daemon.entrypoint import parse_args

    with pytest.raises(SystemExit) as e:
        parse_args(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"entrypoint.sh {neuron_monitor.__version__}\n"


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(daemon_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_missing_root_is_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    got = _run("--root", str(missing), "--once")
    assert got.returncode == 2
    assert got.stderr == f"neuron-monitor: --root {missing}: no such directory\n"
    assert got.stdout == ""
    a_file = tmp_path / "file"
    a_file.write_text("x")
    got = _run("--root", str(a_file), "--once")
    assert (got.returncode, got.stderr) == (2, f"neuron-monitor: --root {a_file}: not a directory\n")


@pytest.mark.parametrize("extra", [(), ("--check",)])
def test_root_and_simulate_together_are_one_line_exit_2(tmp_path: Path, extra: tuple[str, ...]) -> None:
    """Both given, the simulated host used to replace the root asked for without a word (a check of a capture
    passed on the simulator)."""
    got = _run("--root", str(tmp_path), "--simulate", "trn1.2xlarge", "--once", *extra)
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr == f"neuron-monitor: --root {tmp_path} and --simulate trn1.2xlarge: give one of them\n"


def test_record_creates_its_directory(tmp_path: Path) -> None:
    rec = tmp_path / "var" / "log" / "neuron-monitor" / "rec.gz"
    root = tmp_path / "root"
    root.mkdir()
    got = _run("--root", str(root), "--no-imds", "--once", "--record", str(rec))
    assert got.returncode == 0, got.stderr
    with gzip.open(rec, "rt") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    assert len(lines) == 1 and "system_data" in json.loads(lines[0])


def test_an_unwritable_record_path_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rec = blocker / "rec.gz"
    got = _run("--root", str(tmp_path), "--no-imds", "--once", "--record", str(rec))
    assert got.returncode == 2
    assert got.stderr.startswith(f"neuron-monitor: --record {rec}: ") and got.stderr.count("\n") == 1
    assert "Traceback" not in got.stderr


@pytest.mark.parametrize(
    ("config", "where", "suggestion"),
    [
        ({"perod": "1s"}, "perod", "period"),
        ({"neuron_runtimes": [{"tag_filtr": ".*"}]}, "neuron_runtimes[0].tag_filtr", "tag_filter"),
        ({"neuron_runtimes": [{"metrics": [{"tpye": "memory_used"}]}]}, "neuron_runtimes[0].metrics[0].tpye", "type"),
        ({"system_metric": []}, "system_metric", "system_metrics"),
    ],
)
def test_a_mistyped_key_gets_a_suggestion(tmp_path: Path, config: object, where: str, suggestion: str) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps(config))
    got = _run("-c", str(conf), "--once", "--root", str(tmp_path))
    assert got.returncode == 2
    assert got.stderr == (
        f"neuron-monitor: {conf}: {where}: unknown key (not part of the neuron-monitor configuration format);"
        f' did you mean "{suggestion}"?\n'
    )


def test_an_unknown_key_like_none_gets_no_suggestion(tmp_path: Path) -> None:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"colour": "blue"}))
    got = _run("-c", str(conf), "--once", "--root", str(tmp_path))
    assert got.returncode == 2 and "did you mean" not in got.stderr


def _det(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neuron_monitor.timeline.det_cli", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_det_names_itself_in_its_summary_and_errors(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    assert _run("--root", str(tmp_path), "--no-imds", "--once", "--record", str(rec)).returncode == 0
    got = _det(str(rec))
    assert got.returncode == 0, got.stderr
    assert got.stderr.startswith("neuron-monitor-det: no errors detected; ")
    got = _det(str(tmp_path / "missing.gz"))
    assert got.returncode == 2
    assert got.stderr.startswith("neuron-monitor-det: ") and "{" not in got.stderr
    assert got.stderr.count("\n") == 1
