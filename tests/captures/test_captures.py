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
from tests.captures.replay import check, extract, replay, same_report
from tests.conftest import daemon_cmd

HERE = Path(__file__).parent
ARCHIVES = sorted(HERE.glob("*.tar.gz"))


def test_there_are_captures() -> None:
    assert len(ARCHIVES) >= 4


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.name for a in ARCHIVES])
def test_capture_replay_reads_every_needed_source(archive: Path, tmp_path: Path) -> None:
    """The readers find and read, on the replayed host, every source a configured group needs: a capture from a
    driver they do not handle fails here (its host's own report carries the same errors, so comparing with it
    cannot tell) until they do."""
    doc = check(extract(archive, tmp_path))
    failing = [f"{s['source']}: {s['status']} {s['detail']}" for s in doc["sources"] if s["needed"]
               and s["status"] in ("missing", "unreadable", "error")]  # fmt: skip
    assert failing == [] and doc["exit_code"] == 0


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.name for a in ARCHIVES])
def test_capture_replays_to_its_host_report(archive: Path, tmp_path: Path) -> None:
    root = extract(archive, tmp_path)
    if json.loads((root / "capture/check.json").read_text())["exit_code"] != 0:
        pytest.skip("its host's --check failed: that host's report is not the reference, the check above is")
    host = json.loads((root / "capture/report.json").read_text())
    assert same_report(host, replay(root)) == []


def test_a_live_host_capture_replays_to_its_report(tmp_path: Path) -> None:
    """A host that is executing when it is captured (as every user's is): the report's percentiles and running
    models are of its window, which a replay cannot give; everything else matches. Memory holds still here
    (``memory_interval`` 0), as a real runtime's does once its models are loaded."""
    archive = tmp_path / "c.tar.gz"
    with TemporarySimulator("trn1.2xlarge", runtimes=2, seed=5, memory_interval=0) as sim:
        out = subprocess.run(daemon_cmd("--root", str(sim.root), "--capture", str(archive), "--redact", "--no-imds"),
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    root = extract(archive, tmp_path / "x")
    host = json.loads((root / "capture/report.json").read_text())
    assert [r["neuron_runtime_tag"] for r in host["neuron_runtime_data"]] == ["runtime-1", "runtime-2"]
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
