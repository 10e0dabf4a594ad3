"""RootFS resolves below the root; KeptFile re-reads in place, follows replacement, reads files past its buffer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_monitor.host.rootfs import KeptFile, RootFS


def test_paths_resolve_below_root(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "x").write_text("hello")
    root = RootFS(tmp_path)
    assert root.path("/proc/x") == tmp_path / "proc" / "x"
    assert root.read_text("proc/x") == "hello"


def test_kept_file_sees_in_place_updates(tmp_path: Path) -> None:
    p = tmp_path / "counter"
    p.write_bytes(b"1\n")
    kept = KeptFile(p)
    assert kept.read() == b"1\n"
    with open(p, "r+b") as f:  # in place, as the kernel and the simulator update attributes
        f.write(b"22\n")
    assert kept.read() == b"22\n"
    kept.close()


def test_kept_file_larger_than_buffer(tmp_path: Path) -> None:
    p = tmp_path / "big"
    data = os.urandom(200_000)
    p.write_bytes(data)
    kept = KeptFile(p, bufsize=4096)
    assert kept.read() == data
    assert kept.read() == data
    kept.close()


def test_kept_file_reopens_after_vanishing(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"old")
    kept = KeptFile(p)
    assert kept.read() == b"old"
    kept.close()
    p.unlink()
    p.write_bytes(b"new")
    assert kept.read() == b"new"


def test_listdir_lists_once_per_collection_and_fresh_outside(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "neuron0").mkdir()
    root = RootFS(tmp_path)
    root.begin_collection()
    first = root.listdir("d")
    (tmp_path / "d" / "neuron1").mkdir()  # appears mid-collection: the next collection sees it
    assert root.listdir("d") is first == ["neuron0"]
    with pytest.raises(FileNotFoundError):
        root.listdir("absent")
    (tmp_path / "absent").mkdir()
    with pytest.raises(FileNotFoundError):  # the error is part of this collection's view too
        root.listdir("absent")
    root.end_collection()
    assert sorted(root.listdir("d")) == ["neuron0", "neuron1"]
    assert root.listdir("absent") == []
    root.begin_collection()
    assert sorted(root.listdir("d")) == ["neuron0", "neuron1"]
    root.end_collection()
