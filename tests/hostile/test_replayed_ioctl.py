"""A replayed capture's ioctl answers (``dev/neuron-sim/neuronN.ioctl``) are someone else's bytes: an ACQUIRE
answer may place a data block anywhere.

Before: a data block at offset 2^63 (or anywhere past 2^63 - its size) raised OverflowError in pread, which is no
OSError or ValueError: it ended the whole listing, so every runtime of the host left the report (the healthy one
too) and nothing in the report said why ("listing Neuron applications failed" was a log line; with no runtime to
carry it, ``neuron_monitor.error`` stayed ""). After: a block past any device file (`devio.check_block_place`) is
that runtime's error, the others are reported, and a listing that fails as a whole is named in
``neuron_monitor.error``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.config import plan_from_data
from neuron_monitor.daemon.scheduler import Collector, Scheduler
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.appsinfo import parse_acquire_table
from tests.captures.replay import extract

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "captures" / "trn1.2xlarge.tar.gz"


def _replay(root: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "--root", str(root), "--once", "--no-imds"],
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    report: dict[str, Any] = orjson.loads(out.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("offset", [2**63, 2**64 - 4096, 2**63 - 4096, 2**48])
def test_a_block_placed_past_any_file_is_that_runtimes_error_only(tmp_path: Path, offset: int) -> None:
    root = extract(CAPTURE, tmp_path / "root")
    answers = root / L.SIM_IOCTL_DIR / "neuron0.ioctl"
    data = bytearray(answers.read_bytes())
    table = parse_acquire_table(data, L.SIM_ACQUIRE_OFFSET, L.NDS_SLOTS)
    assert len(table) == 2
    victim, other = sorted(table)
    for i in range(L.NDS_SLOTS):
        pid, _, size = L.ACQUIRE_DS.unpack_from(data, L.SIM_ACQUIRE_OFFSET + i * L.ACQUIRE_DS.size)
        if pid == victim:
            L.ACQUIRE_DS.pack_into(data, L.SIM_ACQUIRE_OFFSET + i * L.ACQUIRE_DS.size, pid, offset, size)
    answers.write_bytes(bytes(data))
    report = _replay(root)
    runtimes = {e["pid"]: e for e in report["neuron_runtime_data"]}
    assert set(runtimes) == {victim, other}
    assert f"reading the data block of pid {victim} on neuron0 failed" in runtimes[victim]["error"]
    assert runtimes[other]["error"] == ""
    assert runtimes[other]["report"]["memory_used"]["error"] == ""


class _Failing:
    """An application source whose listing fails as a whole (the one path left for a surprise)."""

    version = 0
    problem = ""

    def snapshot(self) -> list[App]:
        raise OverflowError("Python int too large to convert to C long")

    def close(self) -> None:
        pass


def test_a_listing_that_fails_as_a_whole_is_named_in_neuron_monitor_error() -> None:
    plan = plan_from_data({"period": "1s", "neuron_runtimes": [{"metrics": [{"type": "memory_used"}]}]}, "t.conf")
    collector = Collector(
        RootFS("/"), plan, _Failing(), lambda: rpt.empty_hardware_info(""), lambda: rpt.empty_instance_info("")
    )
    collector.prime()
    collector.collect_on_loop(collector.units)

    async def write(line: bytes) -> None:
        pass

    monitor = Scheduler(collector, write).self_report()
    assert monitor["error"] == "listing Neuron applications failed: Python int too large to convert to C long"
