"""The wheel and the sdist (`make dist`: python -m build): built from the sdist, the wheel installs every command
(each answers --version), ships the Grafana dashboard the exporter serves, the host files (systemd units,
configurations, rules, manifests, dashboards) and, where a compiler is here, the compiled helper built against the
stable ABI (a cp310-abi3 wheel); the README's install lines work on what was built (neuron-monitor-install)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
pytest.importorskip("build")

REPO = Path(__file__).resolve().parents[2]

from neuron_monitor.install.files import shipped_files  # noqa: E402


@pytest.mark.e2e
def test_wheel_and_sdist_install_every_command(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=900)  # fmt: skip
    (wheel,) = dist.glob("neuron_monitor-*.whl")
    (sdist,) = dist.glob("neuron_monitor-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tar_names(sdist) if "/" in n}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "dashboards/neuron-monitor.json"} <= names
    assert {"neuron_monitor/_native.c", "neuron_monitor/_native.pyi"} <= names
    with zipfile.ZipFile(wheel) as zf:
        members = set(zf.namelist())
    assert "neuron_monitor/exporters/prometheus/dashboard.json" in members
    # the host files: every shipped file, the same bytes as the source tree's (neuron-monitor-install writes them)
    shipped = sorted(n.split("/_shipped/", 1)[1] for n in members if n.startswith("neuron_monitor/_shipped/"))
    assert shipped == shipped_files(REPO) and {"systemd/neuron-monitor@.service", "configs/monitor.conf"} <= set(
        shipped
    )
    assert {f"{sdist.name[: -len('.tar.gz')]}/{n}" for n in shipped} <= {n for n in tar_names(sdist)}
    if sys.platform == "linux" and any(
        n.startswith("neuron_monitor/_native.") for n in os.listdir(REPO / "neuron_monitor")
    ):  # the helper against the stable ABI: one wheel for every CPython >= 3.10
        assert "neuron_monitor/_native.abi3.so" in members
        assert wheel.name.endswith("-cp310-abi3-linux_x86_64.whl"), wheel.name

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    version = subprocess.run([sys.executable, "-c", "import neuron_monitor; print(neuron_monitor.__version__)"],
                             env=env, capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    for name in scripts:
        got = subprocess.run([str(target / "bin" / name), "--version"], env=env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert (got.returncode, got.stdout) == (0, f"{name} {version}\n"), got.stderr
    where = subprocess.run(
        [sys.executable, "-c", "import neuron_monitor.exporters.prometheus.app as a; print(a.DASHBOARD)"],
        env=env, capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.strip()  # fmt: skip
    assert Path(where) == target / "neuron_monitor" / "exporters" / "prometheus" / "dashboard.json"

    # the README's own install lines, in the directory holding the wheel (pip --dry-run: the file names and
    # extras as bash expands them must name the wheel; a quoted glob does not); neuron-monitor-install below a
    # scratch root
    root = tmp_path / "root"
    for line in readme_install_block().splitlines():
        if line.startswith("/opt/neuron-monitor/bin/neuron-monitor-install "):
            cmd = line.split("  #", 1)[0].replace("/opt/neuron-monitor/bin/", f"{target}/bin/")
            cmd = cmd.replace("/opt/neuron-monitor/share", str(root / "share"))
            cmd += f" --root {root}" if "--systemd" in cmd else ""
            got = subprocess.run(["bash", "-c", cmd], cwd=dist, env=env, capture_output=True, text=True, timeout=60)
            assert got.returncode == 0, (cmd, got.stderr)
    assert (root / "etc/neuron-monitor/monitor.conf").read_bytes() == (REPO / "configs/monitor.conf").read_bytes()
    for unit in ("neuron-monitor@.service", "neuron-monitor-prometheus.socket", "neuron-monitor-cloudwatch.target"):
        assert (root / "etc/systemd/system" / unit).read_bytes() == (REPO / "systemd" / unit).read_bytes()
    assert (root / "etc/neuron-monitor/prometheus.env").is_file()
    for name in ("deploy/kubernetes/daemonset.yaml", "deploy/prometheus/neuron-monitor.rules.yml",
                 "dashboards/neuron-fleet.json"):  # fmt: skip
        assert (root / "share" / name).read_bytes() == (REPO / name).read_bytes()
    for args in readme_pip_installs():
        line = f"{sys.executable} -m pip install --dry-run --no-deps --no-index --quiet {args}"
        got = subprocess.run(["bash", "-c", line], cwd=dist, capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, (args, got.stderr[-500:])


def tar_names(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as tar:
        return tar.getnames()


def readme_install_block() -> str:
    """The README's "Install without a clone" commands."""
    return (REPO / "README.md").read_text().split("### Install without a clone", 1)[1].split("```", 2)[1]


def readme_pip_installs() -> list[str]:
    """The arguments of each ``pip install`` in the README's "Install without a clone" block (comments removed)."""
    block = readme_install_block()
    found = [
        ln.split("pip install ", 1)[1].split("  #", 1)[0].strip() for ln in block.splitlines() if "pip install " in ln
    ]
    assert found, "no pip install in the README's install block"
    return found


def test_the_readme_names_the_python_the_package_requires() -> None:
    """The install section states pyproject's minimum Python, and how to get it where the system's is older."""
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert required.startswith(">=")
    section = (REPO / "README.md").read_text().split("### Install without a clone", 1)[1].split("\n## ", 1)[0]
    assert f"Python {required[2:]} or newer" in section
    assert "Amazon Linux 2023" in section and "python3.11 -m venv" in section
