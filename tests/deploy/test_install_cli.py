"""neuron-monitor-install (issue 43 item 5): lists, prints and writes out the host files the package ships, never
replacing a configuration file without --force; unknown names are one line and exit 2. (From a built wheel:
tests/deploy/test_packaging.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from neuron_monitor.install.files import shipped_files
from neuron_monitor.install.shipped_list import SHIPPED

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "neuron_monitor.install.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)  # fmt: skip


def test_list_names_every_shipped_file() -> None:
    got = run("--list")
    assert got.returncode == 0, got.stderr
    names = got.stdout.splitlines()
    assert names == shipped_files(REPO)
    for entry in SHIPPED:  # every entry of the list ships something
        assert any(n == entry or n.startswith(entry + "/") for n in names), entry
    assert not [n for n in names if n.endswith(".py") or "/tests/" in n]


def test_manifest_ships_what_the_list_names() -> None:
    manifest = (REPO / "MANIFEST.in").read_text().split()
    for entry in SHIPPED:
        assert entry in manifest or entry.startswith("dashboards/neuron-monitor.json"), entry


def test_print_one_file() -> None:
    got = run("--print", "systemd/neuron-monitor@.service")
    assert got.returncode == 0 and got.stdout == (REPO / "systemd/neuron-monitor@.service").read_text()


def test_unknown_names_are_one_line_exit_2(tmp_path: Path) -> None:
    for args in (["--print", "systemd/nope.service"], ["--extract", str(tmp_path), "nothing-here"]):
        got = run(*args)
        assert got.returncode == 2 and got.stdout == ""
        assert got.stderr.count("\n") == 1 and "not a shipped file or folder" in got.stderr


def test_extract_keeps_paths_and_existing_files(tmp_path: Path) -> None:
    got = run("--extract", str(tmp_path), "deploy/kubernetes", "configs/monitor.conf")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "deploy/kubernetes/daemonset.yaml").read_bytes() == (
        REPO / "deploy/kubernetes/daemonset.yaml"
    ).read_bytes()
    (tmp_path / "configs/monitor.conf").write_text("mine")
    again = run("--extract", str(tmp_path), "configs/monitor.conf")
    assert (tmp_path / "configs/monitor.conf").read_text() == "mine" and again.stdout.startswith("kept ")
    forced = run("--extract", str(tmp_path), "configs/monitor.conf", "--force")
    assert (
        forced.returncode == 0
        and (tmp_path / "configs/monitor.conf").read_bytes() == (REPO / "configs/monitor.conf").read_bytes()
    )


def test_systemd_replaces_units_keeps_configuration(tmp_path: Path) -> None:
    assert run("--systemd", "--root", str(tmp_path)).returncode == 0
    unit = tmp_path / "etc/systemd/system/neuron-monitor-prometheus.service"
    conf = tmp_path / "etc/neuron-monitor/monitor.conf"
    assert unit.read_bytes() == (REPO / "systemd/neuron-monitor-prometheus.service").read_bytes()
    unit.write_text("old")
    conf.write_text("{}")
    got = run("--systemd", "--root", str(tmp_path))
    assert got.returncode == 0
    assert unit.read_bytes() == (REPO / "systemd/neuron-monitor-prometheus.service").read_bytes()
    assert conf.read_text() == "{}" and f"kept {conf} (exists; --force replaces it)" in got.stdout
    assert got.stdout.splitlines()[-1].startswith("next: systemctl daemon-reload")


def test_an_unwritable_target_is_one_line_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "etc"
    blocker.write_text("a file where a folder must go")
    got = run("--systemd", "--root", str(tmp_path))
    assert got.returncode == 1 and got.stderr.count("\n") == 1 and str(blocker) in got.stderr


def test_systemd_env_files_are_readable_by_root_only(tmp_path: Path) -> None:
    """The env files are where the docs put AWS_* keys and an OTLP receiver's token; systemd reads them as root."""
    assert run("--systemd", "--root", str(tmp_path)).returncode == 0
    envs = sorted((tmp_path / "etc/neuron-monitor").glob("*.env"))
    assert {p.name for p in envs} >= {"cloudwatch.env", "otlp.env", "prometheus.env", "neuron-monitor.env"}
    for env in envs:
        assert env.stat().st_mode & 0o777 == 0o600, env
        assert env.read_bytes() == (REPO / "systemd" / env.name).read_bytes()
    assert (tmp_path / "etc/neuron-monitor/monitor.conf").stat().st_mode & 0o777 == 0o644  # the daemon's user reads it
    assert (tmp_path / "etc/systemd/system/neuron-monitor-otlp.service").stat().st_mode & 0o777 == 0o644
    (tmp_path / "etc/neuron-monitor/otlp.env").chmod(0o644)  # written by an older install
    got = run("--systemd", "--root", str(tmp_path))
    assert got.returncode == 0
    assert "otlp.env (exists); other users can read it and it may hold credentials: chmod 600 it" in got.stdout
    assert "cloudwatch.env (exists; --force replaces it)" in got.stdout
