"""A capture archive sent by a stranger, extracted by the tests' `tests.captures.replay.extract` (the step of "A
user's capture becomes a test", tests/captures/README.md).

Before: `extract` used tarfile's "data" filter only, which keeps members inside the tree but bounds no size: a
member of 64 MiB of zeros (a few KiB compressed; a bomb of gigabytes costs the same), 120 MiB in all or 60,000+
members were written out whole. After: the headers are read first and an archive past what `neuron-monitor
--capture` can write (a member over 4 MiB, the device's data blocks; more than 112 MiB in all; more than 60,064
members) raises `NotACapture` with nothing written. Traversal and links out of the tree stay refused by the filter.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.captures import replay
from tests.captures.replay import extract

MIB = 1024 * 1024


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, read in pieces (a member's content is never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.left)
        buf[:n] = bytes(n)
        self.left -= n
        return n


def _archive(path: Path, members: Iterator[tuple[str, int]]) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BufferedReader(_Zeros(size)) if size else None)
    return path


def _refused(archive: Path, into: Path, what: str) -> None:
    with pytest.raises(getattr(replay, "NotACapture", ()), match=what):
        extract(archive, into)
    assert not into.exists() or not any(into.iterdir()), "something was extracted"


def test_a_member_past_the_captures_cap_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "c.tar.gz", iter([("sys/module/neuron/version", 8), ("dev/neuron0", 64 * MIB)]))
    assert archive.stat().st_size < MIB
    _refused(archive, tmp_path / "x", "'dev/neuron0' is 67108864 bytes: not a capture")


def test_more_content_than_a_capture_holds_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "c.tar.gz", ((f"dev/neuron{i}", 4 * MIB) for i in range(30)))
    _refused(archive, tmp_path / "x", "bytes of content: not a capture")


def test_more_members_than_a_capture_holds_are_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "c.tar.gz", ((f"proc/{i}/stat", 0) for i in range(60_100)))
    _refused(archive, tmp_path / "x", "members: not a capture")


def test_a_member_climbing_out_of_the_tree_is_still_refused(tmp_path: Path) -> None:
    """What the "data" filter already refused (held before and after): ``../`` and an absolute link target."""
    archive = tmp_path / "c.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.FilterError):
        extract(archive, tmp_path / "x")
    assert not (tmp_path / "escaped").exists()
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("sys/module/neuron/version")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(tarfile.FilterError):
        extract(archive, tmp_path / "y")


@pytest.mark.parametrize("kind", ["fifo", "directory", "link to a fifo"])
def test_capture_never_replaces_a_node_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """``neuron-monitor --capture PATH`` renames its archive over PATH: before, a FIFO or device node there was
    replaced by a 0600 file (``--capture /dev/null`` as root broke /dev/null for every user). A FIFO or directory
    is now exit 2 with one line, left as it is; a link there is replaced (the node it leads to is untouched)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = {"fifo": fifo, "directory": tmp_path / "dir", "link to a fifo": tmp_path / "link"}[kind]
    if kind == "directory":
        path.mkdir()
    elif kind == "link to a fifo":
        path.symlink_to(fifo)
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "trn1.2xlarge", "--capture", str(path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    if kind == "link to a fifo":
        assert p.returncode == 0, p.stderr
        assert stat.S_ISREG(path.lstat().st_mode)
        return
    words = "a FIFO" if kind == "fifo" else "a directory"
    assert p.returncode == 2
    assert p.stderr.endswith(f"--capture {path}: is {words}, not a regular file (left as it is)\n"), p.stderr
    assert stat.S_ISDIR(path.lstat().st_mode) if kind == "directory" else stat.S_ISFIFO(path.lstat().st_mode)
