"""The driver's PCI-address answer (NEURON_IOCTL_DEVICE_BDF_EXT): its bytes, the recorded answers the simulator and
captures hold, a refusal's errno, and a real character device that does not know the ioctl (/dev/null under a
root whose dev links to the host's: ENOTTY from the kernel itself)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import pci


def test_request_number_is_ior_106_of_a_pointer() -> None:
    # _IOR(type, nr, size) = (2 << 30) | (size << 16) | (type << 8) | nr, as the driver's other ioctls we use
    assert (2 << 30) | (8 << 16) | (ord("N") << 8) | 106 == pci.IOCTL_DEVICE_BDF_EXT


def test_answer_round_trip_and_range() -> None:
    raw = pci.pack_answer("0000:a3:1f.7")
    assert len(raw) == 16 and pci.parse_answer(raw) == "0000:a3:1f.7"
    with pytest.raises(ValueError, match="not a PCI address"):
        pci.parse_answer(pci.BDF_EXT.pack(0, 0, 0x100, 0, 0))  # bus past 255
    with pytest.raises(ValueError, match="an answer of 3 bytes"):
        pci.parse_answer(b"abc")
    with pytest.raises(OSError) as e:
        pci.parse_answer(b"EINVAL\n")
    assert e.value.errno == errno.EINVAL


def _device(root: Path, index: int, answer: bytes | None) -> None:
    (root / "dev").mkdir(exist_ok=True)
    (root / f"dev/neuron{index}").write_bytes(b"")
    if answer is not None:
        (root / "dev/neuron-sim").mkdir(exist_ok=True)
        (root / pci.sim_answer_rel(index)).write_bytes(answer)


def test_recorded_answers(tmp_path: Path) -> None:
    _device(tmp_path, 0, pci.pack_answer("0000:10:00.0"))
    _device(tmp_path, 1, b"EINVAL\n")
    _device(tmp_path, 2, None)
    root = RootFS(tmp_path)
    assert pci.try_pci_address(root, 0) == ("0000:10:00.0", "")
    assert pci.try_pci_address(root, 1)[1].startswith("EINVAL")
    assert pci.try_pci_address(root, 2)[1].startswith("ENOTTY")
    assert pci.try_pci_address(root, 3)[1].startswith("ENOENT")  # no device node at all


def test_fifo_device_node_does_not_block(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    os.mkfifo(tmp_path / "dev/neuron0")
    address, why = pci.try_pci_address(RootFS(tmp_path), 0)  # returns: nothing opened it for reading or writing
    assert address == "" and why


def test_a_real_character_device_that_refuses(tmp_path: Path) -> None:
    """A character device named neuron0 that is not the driver's (here /dev/null's numbers, made with mknod, which
    needs CAP_MKNOD): asked, it refuses the ioctl."""
    import stat

    (tmp_path / "dev").mkdir()
    try:
        os.mknod(tmp_path / "dev/neuron0", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    address, why = pci.try_pci_address(RootFS(tmp_path), 0)
    assert address == "" and why.startswith("ENOTTY"), why  # the kernel's answer to an ioctl /dev/null lacks


def test_a_link_to_another_device_is_never_opened(tmp_path: Path) -> None:
    """A root may link its dev entries to the host's own, but only to a node named as the link: a link to another
    device is refused unopened (before: /dev/null was opened and sent the driver's ioctl)."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/neuron0").symlink_to("/dev/null")
    address, why = pci.try_pci_address(RootFS(tmp_path), 0)
    assert address == "" and why.startswith("ENODEV") and "not a Neuron device node" in why, why


def test_link_out_of_the_root_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "neuron-sim").mkdir()
    (outside / "neuron0").write_bytes(b"")
    (outside / "neuron-sim/neuron0.bdf_ext").write_bytes(pci.pack_answer("0000:99:00.0"))
    root = tmp_path / "root"
    root.mkdir()
    (root / "dev").symlink_to(outside)  # absolute: resolves inside the root, where there is no such directory
    address, _ = pci.try_pci_address(RootFS(root), 0)
    assert address == ""
