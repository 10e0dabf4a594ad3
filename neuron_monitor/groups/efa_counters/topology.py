"""The PCI topology join: which Neuron devices each EFA adapter serves (facts and public sources:
docs/neuron-data.md, "EFA adapters and Neuron devices").

Every PCI function has a directory in ``sys/devices/pci<domain>:<bus>/<bridge>/.../<function>``: the path names
each bridge (root port, PCIe switch ports) between the root complex and the function. A class device with a PCI
parent links to that directory as ``device`` (``sys/class/infiniband/<efa>/device``; for a Neuron device
``sys/class/neuron_device/neuronN/device`` when its driver gives the class device a parent). The public driver
gives none: there a Neuron device's PCI address comes from the driver's ``NEURON_IOCTL_DEVICE_BDF_EXT`` answer
(neuron/pci.py) and its directory from the kernel's ``sys/bus/pci/devices/<address>`` link. An adapter serves
the Neuron devices that sit below its nearest bridge that has any Neuron device below it at all; sharing only the
root complex is no join. Where a Neuron device has no PCI path the join for it is unknown, and an adapter whose
nearest devices are unknown gets no device: the label stays empty, never guessed.

Links are resolved inside the root (`RootFS` confinement), so a root's planted symlinks cannot point the join at
the host's own tree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from neuron_monitor.host.rootfs import RootFS, resolve_in_root
from neuron_monitor.neuron.pci import dra_efa_addresses, try_pci_address

PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_ROOT_COMPLEX = re.compile(r"pci[0-9a-f]{4}:[0-9a-f]{2}")
NEURON_CLASS = "sys/class/neuron_device"
PCI_DEVICES = "sys/bus/pci/devices"  # the kernel's link per PCI function, named by its address
FROM_PARENT = "sysfs parent"
FROM_IOCTL = "driver ioctl"
FROM_DRA = "DRA attribute"


def resolve(root: RootFS, rel: str) -> str | None:
    """The root-relative path ``rel`` names once every symlink is resolved inside the root; None if missing."""
    base = os.fspath(root.root)
    try:
        host = resolve_in_root(base, rel) if root.confined else os.path.realpath(os.path.join(base, rel.lstrip("/")))
    except OSError:
        return None
    if not os.path.lexists(host):
        return None
    return os.path.relpath(host, base)


def pci_chain(root: RootFS, link_rel: str) -> tuple[str, ...] | None:
    """The PCI addresses from the root complex down to the function the link ``link_rel`` points at
    (``("0000:00:01.0", "0000:01:00.0", "0000:02:03.0", "0000:10:00.0")``); None when it is not a PCI device."""
    path = resolve(root, link_rel)
    if path is None:
        return None
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _ROOT_COMPLEX.fullmatch(part):
            chain = []
            for p in parts[i + 1 :]:
                if not PCI_ADDRESS.fullmatch(p):
                    break
                chain.append(p)
            return tuple(chain) or None
    return None


def link_problem(root: RootFS, link_rel: str) -> str | None:
    """Why the symlink ``link_rel`` (a class device's ``device`` link) cannot be followed, or None when it can
    (or is not there): it loops, or it points outside ``sys/devices`` (at or above the root)."""
    base = os.fspath(root.root)
    if not os.path.islink(os.path.join(base, link_rel)):
        return None
    try:
        host = resolve_in_root(base, link_rel) if root.confined else os.path.realpath(os.path.join(base, link_rel))
    except OSError as e:
        return f"its device link cannot be followed ({e.strerror or e})"
    if not os.path.relpath(host, base).startswith("sys/devices/"):
        return "its device link points outside sys/devices"
    return None


def driver_name(root: RootFS, device_rel: str) -> str | None:
    """The kernel driver bound to a class device's PCI function (the ``device/driver`` link's name), if any."""
    path = resolve(root, f"{device_rel}/device/driver")
    return os.path.basename(path) if path else None


@dataclass(frozen=True, slots=True)
class Join:
    """What the topology says about one adapter: its PCI address and the Neuron devices it serves ([] unknown)."""

    pci_address: str
    neuron_devices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NeuronPlace:
    """Where one Neuron device sits: its PCI chain (() unknown) or, from DRA, the address of the EFA adapter that
    serves it; where that came from (`FROM_PARENT`, `FROM_IOCTL`, `FROM_DRA`, "" unknown) and, when unknown, why."""

    chain: tuple[str, ...]
    source: str
    why: str = ""
    efa_address: str = ""

    @property
    def known(self) -> bool:
        return bool(self.chain or self.efa_address)


def neuron_place(root: RootFS, index: int, dra: dict[int, str] | None = None) -> NeuronPlace:
    """Device ``index``'s place: its class device's parent link, else the driver's BDF answer, else the DRA
    attribute naming its EFA adapter (``dra``: device -> adapter address; the published one when None)."""
    chain = pci_chain(root, f"{NEURON_CLASS}/neuron{index}/device")
    if chain:
        return NeuronPlace(chain, FROM_PARENT)
    address, why = try_pci_address(root, index)
    if address:
        chain = pci_chain(root, f"{PCI_DEVICES}/{address}")
        if chain:
            return NeuronPlace(chain, FROM_IOCTL)
        why = f"the driver answered {address}, but {PCI_DEVICES}/{address} is not a PCI device"
    else:
        why = f"no PCI parent in sysfs; BDF ioctl: {why}"
    efa = (dra_efa_addresses() if dra is None else dra).get(index, "")
    if efa:
        return NeuronPlace((), FROM_DRA, why, efa)
    return NeuronPlace((), "", why)


def neuron_places(root: RootFS, devices: tuple[int, ...], dra: dict[int, str] | None = None) -> dict[int, NeuronPlace]:
    return {index: neuron_place(root, index, dra) for index in devices}


def served_by(pci_address: str, chain: tuple[str, ...] | None, places: dict[int, NeuronPlace]) -> tuple[int, ...]:
    """The Neuron devices the adapter at ``pci_address`` (PCI ``chain``) serves: the PCI join over the devices
    whose chain is known, and the devices whose DRA attribute names this adapter."""
    chains = {i: p.chain for i, p in places.items() if p.chain}
    named = {i for i, p in places.items() if p.efa_address and p.efa_address == pci_address}
    return tuple(sorted(set(join(chain, chains)) | named))


def neuron_chains(root: RootFS, devices: tuple[int, ...]) -> dict[int, tuple[str, ...]]:
    """Neuron device index -> its PCI chain, for the devices whose place is known (`neuron_place`)."""
    return {i: p.chain for i, p in neuron_places(root, devices).items() if p.chain}


def join(adapter_chain: tuple[str, ...] | None, neurons: dict[int, tuple[str, ...]]) -> tuple[int, ...]:
    """The Neuron devices below the adapter's nearest bridge that has any below it (sorted); () when only the
    root complex is shared, or the adapter or the devices have no PCI chain."""
    if not adapter_chain or not neurons:
        return ()
    for depth in range(len(adapter_chain) - 1, 0, -1):  # the bridges above the adapter, nearest first
        bridge = adapter_chain[:depth]
        below = sorted(i for i, chain in neurons.items() if chain[:depth] == bridge and len(chain) > depth)
        if below:
            return tuple(below)
    return ()
