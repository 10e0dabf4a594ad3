"""A device file that shrinks under the daemon's mappings is that device's error, never SIGBUS.

Before (issue 32): truncating a simulated /dev/neuronN under `--root` killed the daemon with SIGBUS (a mapped data
block past the file's new end). Real character devices cannot shrink; simulator-style trees can. After: the
device's listing fails when its file no longer covers the blocks mapped from it, every mapping of it is closed,
and its applications carry the error; the other device's runtime is unaffected. Each scenario runs in a child
process, so a SIGBUS shows as its exit status instead of ending the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO

SCENARIO = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from neuron_monitor.groups.execution_stats.collector import ExecutionStats
    from neuron_monitor.host.rootfs import RootFS
    from tests.neuron.test_app_source_truth import Rig

    root, size, restore = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    rig = Rig(root, "inf2.24xlarge", 2)  # 6 devices, 2 runtimes: job-00 and job-01 on devices of their own
    stats = ExecutionStats(RootFS("/"))
    stats.collect(*rig.snapshot())
    rig.advance(3)
    stats.collect(*rig.snapshot())
    victim = rig.runtime("job-00")
    dev = min(victim.plan.cores)
    path = root / "dev" / f"neuron{dev}"
    full = path.stat().st_size
    os.truncate(path, size)
    out = {}
    for i in range(3):
        apps, gone = rig.snapshot()
        body = stats.collect(apps, gone)
        out[i] = {a.tag: a.error for a in apps}
        out[f"body{i}"] = {str(pid): sorted(b) for pid, b in body.items()}
    if restore:
        os.truncate(path, full)
        apps, gone = rig.snapshot()
        stats.collect(apps, gone)
        out["restored"] = {a.tag: a.error for a in apps}
    print(json.dumps(out))
    """
)


def run(tmp_path: Path, size: int, restore: bool = False) -> dict[str, dict[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path / "root"), str(size), "1" if restore else "0"],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr.decode()[-2000:])
    result: dict[str, dict[str, str]] = __import__("json").loads(proc.stdout)
    return result


@pytest.mark.parametrize("size", [0, 4096, 60000])  # 60000: inside the block, before its last counters
def test_a_shrunk_device_file_is_its_runtimes_error(tmp_path: Path, size: int) -> None:
    out = run(tmp_path, size)
    for i in ("0", "1", "2"):
        errors = out[i]
        assert "job-01" in errors and errors["job-01"] == ""  # the other runtime, on another device
        victim = [e for tag, e in errors.items() if tag != "job-01"]
        assert victim and all(e for e in victim)
    first = next(e for tag, e in out["0"].items() if tag != "job-01")
    assert "shrank" in first or "mmap" in first or "removed" in first


def test_a_file_that_still_covers_the_block_is_read(tmp_path: Path) -> None:
    out = run(tmp_path, 256 * 1024 + 100)  # job-00's block is the device's first slab: still whole
    assert all(e == "" for e in out["2"].values())


def test_a_restored_device_file_is_read_again(tmp_path: Path) -> None:
    out = run(tmp_path, 0, restore=True)
    assert out["restored"]["job-01"] == ""
