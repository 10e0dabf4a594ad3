"""Builds EFA adapter trees under a test root from the group's real-format test data (see
neuron_monitor/groups/efa_counters/testdata/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import neuron_monitor.groups.efa_counters as package
from neuron_monitor.neuron import pci

TESTDATA = Path(package.__file__).parent / "testdata"


def port_files(name: str = "port_files.txt") -> dict[str, bytes]:
    """``ports/1/<file>`` -> its bytes (with the newline the kernel prints)."""
    out = {}
    for line in (TESTDATA / name).read_text().splitlines():
        path, _, content = line.partition(":")
        out[path] = (content + "\n").encode()
    return out


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def pci_function(root: Path, chain: tuple[str, ...], driver: str) -> Path:
    """The directory of the PCI function at the end of ``chain`` (root port first), bound to ``driver``."""
    fdir = root / "sys/devices/pci0000:00" / "/".join(chain)
    fdir.mkdir(parents=True, exist_ok=True)
    drivers = root / "sys/bus/pci/drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    _link(fdir / "driver", drivers)
    return fdir


def add_adapter(root: Path, name: str, chain: tuple[str, ...], files: dict[str, bytes] | None = None) -> Path:
    """An EFA adapter ``name`` at PCI ``chain`` with one port holding ``files``; returns the port directory."""
    fdir = pci_function(root, chain, "efa")
    ib = fdir / "infiniband" / name
    _link(root / "sys/class/infiniband" / name, ib)
    _link(ib / "device", fdir)
    for rel, content in (files if files is not None else port_files()).items():
        path = ib / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return ib / "ports/1"


def add_neuron(
    root: Path, index: int, chain: tuple[str, ...] | None, answer: tuple[str, ...] | bytes | None = None
) -> None:
    """Neuron device ``index`` (a class device), with a PCI parent at ``chain`` unless it is None. With ``answer``
    its ``/dev/neuronN`` answers the BDF ioctl (the simulator's recorded form): a PCI ``chain`` (the function is
    made, with the kernel's ``sys/bus/pci/devices`` link) answers its last address; bytes are the answer itself."""
    dev = root / "sys/devices/virtual/neuron_device" / f"neuron{index}"
    dev.mkdir(parents=True, exist_ok=True)
    _link(root / "sys/class/neuron_device" / f"neuron{index}", dev)
    if chain is not None:
        _link(dev / "device", pci_function(root, chain, "neuron"))
    if answer is None:
        return
    if isinstance(answer, tuple):
        fdir = pci_function(root, answer, "neuron")
        _link(root / "sys/bus/pci/devices" / answer[-1], fdir)
        answer = pci.pack_answer(answer[-1])
    (root / "dev/neuron-sim").mkdir(parents=True, exist_ok=True)
    (root / f"dev/neuron{index}").write_bytes(b"")
    (root / pci.sim_answer_rel(index)).write_bytes(answer)


def switch(s: int, k: int) -> tuple[str, ...]:
    """The PCI chain of endpoint ``k`` below switch ``s`` (root port, upstream port, downstream port, function)."""
    bus = 1 + s * 8
    return (f"0000:00:{s + 1:02x}.0", f"0000:{bus:02x}:00.0", f"0000:{bus + 1:02x}:{k:02x}.0",
            f"0000:{bus + 2 + k:02x}:00.0")  # fmt: skip


def set_counter(port: Path, name: str, value: int | bytes) -> None:
    """Rewrite one counter in place (as the kernel's attribute changes under a kept descriptor)."""
    data = value if isinstance(value, bytes) else b"%d\n" % value
    fd = os.open(port / "hw_counters" / name, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
