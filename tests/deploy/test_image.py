"""The Dockerfile against the package: the commands the image and the DaemonSet run are console scripts the
package installs, and the image's default command uses real options. (No container runtime here: the build
itself is not run.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
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
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
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


def stages() -> list[str]:
    """The Dockerfile's build stages, each from its FROM line on."""
    return ["FROM" + part for part in re.split(r"^FROM", dockerfile(), flags=re.M)[1:]]


def test_a_build_stage_compiles_the_helper_and_the_image_ships_it() -> None:
    build, final = stages()
    assert re.match(r"FROM python:3\.\d+-slim AS build\n", build)
    assert re.search(r"apt-get install .*\bgcc\b.*\blibc6-dev\b", build)
    assert 'pip install --no-cache-dir ".[k8s]"' in build
    assert 'python -c "import neuron_monitor._native' in build  # the build fails without the helper
    assert "COPY dashboards/neuron-monitor.json" in build  # shipped in the package (setup.py)
    assert final.split("\n", 1)[0] == build.split(" AS ", 1)[0]  # the same Python as the helper was built for
    assert "COPY --from=build /opt/neuron-monitor /opt/neuron-monitor" in final
    assert "gcc" not in final and "apt-get" not in final
    assert "pip uninstall --yes --quiet pip setuptools" in build  # nothing in the package imports them


def test_the_build_context_has_what_the_build_stage_copies() -> None:
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()]
    assert ".venv" in ignored and "neuron_monitor/*.so" in ignored  # no host-built helper in the image
    assert "!dashboards/neuron-monitor.json" in ignored
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile(), re.M):
        for path in copied.split():
            assert (REPO / path).exists(), path


def _docker_works() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.e2e
@pytest.mark.skipif(not _docker_works(), reason="no container runtime here (docker info fails)")
def test_the_built_image_imports_the_compiled_helper() -> None:
    tag = f"neuron-monitor-test:helper-{os.getpid()}-{time.monotonic_ns()}"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(REPO)], check=True, capture_output=True, timeout=1800)
    try:
        got = subprocess.run(
            ["docker", "run", "--rm", tag, "python", "-c", "import neuron_monitor._native as n; print(n.__file__)"],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        assert got.stdout.strip().endswith(".so")
        size = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True, check=True
        ).stdout
        assert int(size) < 300_000_000, size  # docs/running.md estimates about 210 MB
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)
