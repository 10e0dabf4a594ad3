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


def test_a_listing_with_max_age_is_kept_across_collections_until_that_old(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "neuron0").mkdir()
    root = RootFS(tmp_path)
    root.begin_collection(100.0)
    first = root.listdir("d", max_age=1.0)
    root.end_collection()
    (tmp_path / "d" / "neuron1").mkdir()
    root.begin_collection(100.9)  # younger than a second: the same listing, not listed again
    assert root.listdir("d", max_age=1.0) is first == ["neuron0"]
    assert root.listdir("d") is first  # one view per collection, whoever asks
    root.end_collection()
    root.begin_collection(101.0)  # a second old: listed again
    second = root.listdir("d", max_age=1.0)
    assert sorted(second) == ["neuron0", "neuron1"]
    root.end_collection()
    (tmp_path / "d" / "neuron2").mkdir()
    root.begin_collection(99.0)  # a clock that went back keeps nothing
    assert len(root.listdir("d", max_age=1.0)) == 3
    root.end_collection()
    root.begin_collection()  # a collection begun without the clock keeps nothing either
    (tmp_path / "d" / "neuron3").mkdir()
    assert len(root.listdir("d", max_age=1.0)) == 4
    root.end_collection()
    assert len(root.listdir("d", max_age=1.0)) == 4  # outside a collection: always listed


def test_a_kept_listing_error_and_forget_listing(tmp_path: Path) -> None:
    root = RootFS(tmp_path)
    root.begin_collection(5.0)
    with pytest.raises(FileNotFoundError):
        root.listdir("d", max_age=1.0)
    root.end_collection()
    (tmp_path / "d").mkdir()
    root.begin_collection(5.5)  # the error is kept as the listing is
    with pytest.raises(FileNotFoundError):
        root.listdir("d", max_age=1.0)
    root.forget_listing("d")  # a reader saw a failure: this collection keeps its view, the next lists again
    with pytest.raises(FileNotFoundError):
        root.listdir("d", max_age=1.0)
    root.end_collection()
    root.begin_collection(5.6)
    assert root.listdir("d", max_age=1.0) == []
    root.end_collection()


def _class_link_root(tmp_path: Path) -> RootFS:
    """A root whose sys/class link is relative and climbs with "..", as the driver's sysfs class links do."""
    dev = tmp_path / "sys/devices/virtual/neuron_device/neuron0/stats/hardware"
    dev.mkdir(parents=True)
    (dev / "mem_ecc_uncorrected").write_text("3\n")
    (tmp_path / "sys/class/neuron_device").mkdir(parents=True)
    (tmp_path / "sys/class/neuron_device/neuron0").symlink_to("../../devices/virtual/neuron_device/neuron0")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hosts").write_text("inside\n")
    (tmp_path / "sys/escape").symlink_to("../../../../../../../etc/hosts")
    return RootFS(tmp_path)


class _EagainSyscall:
    """libc whose openat2 answers EAGAIN (a rename elsewhere on the host raced a ".." step) ``times`` times."""

    def __init__(self, real: object, times: int) -> None:
        self.real, self.times, self.calls = real, times, 0

    def syscall(self, *args: object) -> int:
        self.calls += 1
        if self.calls <= self.times:
            import ctypes
            import errno

            ctypes.set_errno(errno.EAGAIN)
            return -1
        return int(self.real.syscall(*args))  # type: ignore[attr-defined]


@pytest.mark.parametrize("times", [1, 7, 10_000])
def test_openat2_eagain_is_retried_then_resolved_in_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: int
) -> None:
    """openat2's EAGAIN is no missing file: it is tried again, and when renames elsewhere keep racing it the path is
    resolved as on a kernel without openat2 (still inside the root). It made neuron_hw_counters' careful path name a
    present counter file 'not exposed' whenever another process renamed something (a flaky hypothesis test)."""
    from neuron_monitor.host import rootfs

    root = _class_link_root(tmp_path)
    if rootfs._openat2_in_root(os.open(tmp_path, os.O_PATH), ".", os.O_PATH) is None:
        pytest.skip("no openat2 here")
    fake = _EagainSyscall(rootfs._libc, times)
    monkeypatch.setattr(rootfs, "_libc", fake)
    assert root.read_bytes("sys/class/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected") == b"3\n"
    assert root.exists("sys/class/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected")
    assert root.read_bytes("sys/escape") == b"inside\n"  # the fallback resolution stays inside the root too
    assert rootfs._openat2_works is True  # EAGAIN never turns openat2 off
