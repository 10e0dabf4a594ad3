"""Every capture in tests/captures/ replays to the report its host gave (README.md: how a user's capture becomes
a test), and `--capture` works on every simulated shape (a paused simulated host captured by a real
``neuron-monitor --capture`` process, extracted, replayed, and checked)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from neuron_monitor.sim.layouts import REORGANIZED
from neuron_monitor.sim.shapes import SHAPES
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.captures.replay import extract, replay, same_report
from tests.conftest import daemon_cmd

HERE = Path(__file__).parent
ARCHIVES = sorted(HERE.glob("*.tar.gz"))


def test_there_are_captures() -> None:
    assert len(ARCHIVES) >= 4


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.name for a in ARCHIVES])
def test_capture_replays_to_its_host_report(archive: Path, tmp_path: Path) -> None:
    root = extract(archive, tmp_path)
    host = json.loads((root / "capture/report.json").read_text())
    assert same_report(host, replay(root)) == []


# every shape on today's layout, and each reorganized layout the simulator imitates on a trn2.48xlarge
CASES = [(shape, None) for shape in sorted(SHAPES)] + [("trn2.48xlarge", layout) for layout in sorted(REORGANIZED)]


@pytest.mark.parametrize(("shape", "driver"), CASES, ids=[f"{s}-{d}" if d else s for s, d in CASES])
def test_capture_of_every_simulated_shape(shape: str, driver: str | None, tmp_path: Path) -> None:
    archive = tmp_path / "c.tar.gz"
    options = {"driver": driver} if driver else {}
    with TemporarySimulator(shape, runtimes=2, seed=5, **options) as sim:
        sim.pause()  # the moment holds still: a replay then gives the same levels
        out = subprocess.run(daemon_cmd("--root", str(sim.root), "--capture", str(archive), "--no-imds"),
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    root = extract(archive, tmp_path / "x")
    assert json.loads((root / "capture/check.json").read_text())["exit_code"] == 0
    assert json.loads((root / "capture/info.json").read_text())["instance_type"] == shape
    host = json.loads((root / "capture/report.json").read_text())
    assert same_report(host, replay(root)) == []
