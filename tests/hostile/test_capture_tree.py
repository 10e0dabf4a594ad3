"""A hostile root cannot make `neuron-monitor --capture` or `--check` hang, leave the root or pass their caps: FIFOs
(as a sysfs file, as the driver version, as /dev/neuron0), links out of the root (absolute and by ``..``), a huge
file, and a million files in one directory of the device tree. Real daemon processes, deadlines only."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.capture.walk import FILE_CAP, MAX_MEMBERS, TOTAL_CAP
from tests.conftest import daemon_cmd

MILLION = 1_000_000
TIMEOUT = 300  # a generous deadline: the caps end the work long before


@pytest.fixture(scope="module")
def hostile_root() -> Iterator[Path]:
    # a tmpfs when there is one: a million files on a disk take minutes to make
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    top = Path(tempfile.mkdtemp(prefix="nm-hostile-", dir=base))
    root = top / "root"
    dev = root / "sys/devices/virtual/neuron_device/neuron0"
    (dev / "stats/hardware").mkdir(parents=True)
    (dev / "stats/hardware/mem_ecc_uncorrected").write_text("0\n")
    os.mkfifo(dev / "stats/hardware/sram_ecc_uncorrected")
    (dev / "escape_abs").symlink_to("/etc")
    (dev / "escape_rel").symlink_to("../../../../../../../../../../etc")
    with open(dev / "huge", "wb") as f:
        f.truncate(4 << 30)  # sparse: 4 GiB that cost nothing on disk
    junk = dev / "junk"
    junk.mkdir()
    for i in range(MILLION):
        os.close(os.open(junk / f"f{i}", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    (root / "sys/class/neuron_device").mkdir(parents=True)
    (root / "sys/class/neuron_device/neuron0").symlink_to("../../devices/virtual/neuron_device/neuron0")
    (root / "sys/class/neuron_device/neuron1").symlink_to("/etc")  # an absolute link: resolves inside the root
    (root / "sys/module/neuron").mkdir(parents=True)
    os.mkfifo(root / "sys/module/neuron/version")
    (root / "dev").mkdir()
    os.mkfifo(root / "dev/neuron0")
    (root / "sys/class/infiniband").mkdir(parents=True)
    (root / "sys/class/infiniband/efa0").symlink_to("/sys/class/net")  # out of the root
    (root / "proc").mkdir()
    (root / "proc/stat").write_text("cpu  1 2 3 4 5 6 7 0 0 0\ncpu0 1 2 3 4 5 6 7 0 0 0\n")
    yield root
    shutil.rmtree(top, ignore_errors=True)


def test_capture_of_a_hostile_tree_stays_bounded_and_inside(hostile_root: Path, tmp_path: Path) -> None:
    archive = tmp_path / "c.tar.gz"
    out = subprocess.run(daemon_cmd("--root", str(hostile_root), "--capture", str(archive), "--no-imds"),
                         capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert out.returncode == 0, out.stderr
    files = 0
    content = 0
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            assert not m.name.startswith("/") and ".." not in m.name.split("/"), m.name
            assert m.isfile() or m.isdir() or m.issym(), m.name  # never a FIFO or a device
            if m.issym():
                target = posixpath.normpath(posixpath.join(posixpath.dirname(m.name), m.linkname))
                assert not m.linkname.startswith("/") and not target.startswith(".."), (m.name, m.linkname)
            if m.isfile():
                files += 1
                content += m.size
                assert m.size <= FILE_CAP or m.name.startswith("capture/"), m.name
        names = set(tar.getnames())
        skipped = tar.extractfile("capture/skipped.txt").read().decode()  # type: ignore[union-attr]
        info = json.loads(tar.extractfile("capture/info.json").read())  # type: ignore[union-attr]
    assert len(names) <= MAX_MEMBERS + 10 and content <= TOTAL_CAP + FILE_CAP
    dev = "sys/devices/virtual/neuron_device/neuron0"
    assert f"{dev}/huge" not in names and f"{dev}/stats/hardware/sram_ecc_uncorrected" not in names
    assert f"{dev}/escape_abs" not in names and f"{dev}/escape_rel" not in names
    assert f"{dev}/stats/hardware/mem_ecc_uncorrected" in names  # the ordinary file next to them is there
    assert "per-file cap" in skipped and "not a regular file" in skipped and "out of the root" in skipped
    assert "absolute link" in skipped and "entries in one directory" in skipped
    assert info["left_out"] > 0 and info["members"] <= MAX_MEMBERS + 10


def test_check_of_a_hostile_tree_returns(hostile_root: Path) -> None:
    out = subprocess.run(daemon_cmd("--root", str(hostile_root), "--check", "--json", "--no-imds"),
                         capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr  # the driver version is a FIFO: unreadable, and needed
    by_source = {s["source"]: s for s in json.loads(out.stdout)["sources"]}
    assert by_source["driver version"]["status"] == "unreadable"
    assert by_source["/dev/neuron0"]["status"] == "unreadable"  # a FIFO is no device: named, never opened to block
