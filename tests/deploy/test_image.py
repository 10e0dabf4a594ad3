"""The Dockerfile against the package: the commands the image and the DaemonSet run are console scripts the
package installs, and the image's default command uses real options. (No container runtime here: the build
itself is not run.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]


def dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def test_image_installs_the_k8s_extra_and_runs_unprivileged_by_default() -> None:
    text = dockerfile()
    assert '".[k8s]"' in text
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("grpcio") for d in extras["k8s"])
    assert re.search(r"^USER 65534", text, re.M)
    assert "COPY configs/monitor.conf /etc/neuron-monitor/monitor.conf" in text


def test_default_command_uses_real_options() -> None:
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", dockerfile(), re.M).group(1))
    assert cmd[0] in scripts()
    help_text = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.cli", "--help"], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    for flag in (a for a in cmd if a.startswith("--")):
        assert flag in help_text


def test_daemonset_commands_are_installed_console_scripts() -> None:
    ds = yaml.safe_load((REPO / "deploy" / "kubernetes" / "daemonset.yaml").read_text())
    for c in ds["spec"]["template"]["spec"]["containers"]:
        program = c["command"][-1].split()[1]  # "exec <program> ..."
        assert program in scripts(), c["name"]


def test_dockerignore_keeps_the_package_in_the_context() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()}
    assert not ignored & {"neuron_monitor", "configs", "pyproject.toml", "README.md"}
