"""A Neuron device's PCI address, as the driver answers it (facts and public sources: docs/neuron-data.md, "EFA
adapters and Neuron devices").

The driver creates its class devices ``neuronN`` without a PCI parent, so sysfs does not say where a device sits
on the PCI bus. The driver answers it through ``NEURON_IOCTL_DEVICE_BDF_EXT`` on ``/dev/neuronN``
(``neuron_ioctl.h``: ``_IOR(NEURON_IOCTL_BASE, 106, struct neuron_ioctl_device_bdf_ext *)``; the argument is
``{__u32 nd_index (in: the device index relative to the descriptor's own device); __u32 domain; __u32 bus_number;
__u8 slot; __u8 func}``). It is a "misc" ioctl: the driver serves it on a descriptor opened write-only, which does
not attach the caller to the device (no process slot taken, no wait for a reset). ``nd_index`` 0 names the device
the descriptor is open on, whatever the numbering a container sees.

`device_pci_address(root, index)` asks it: on a character device the ioctl itself, under the simulator (and in an
extracted capture, see capture/) the answer file ``dev/neuron-sim/neuronN.bdf_ext`` holding the 16 bytes the
driver would copy out, or one line naming the errno the driver answered (``EINVAL``). Either way it returns
``"dddd:bb:ss.f"`` or raises OSError with the errno, so callers tell "refused" from "answered" the same way on both.

The second source, where the ioctl is refused: with ``--k8s-info`` and the Neuron DRA driver, each device's
ResourceSlice attribute ``resource.aws.com/devicegroup1_id`` names the PCI address of the EFA adapter that serves
it. The pod-resources watcher (k8s/pod_info.py) publishes them here (`set_dra_efa_addresses`) as it lists the
slices; the EFA join reads them (`dra_efa_addresses`). One process-wide map, replaced whole (never mutated), so a
reader on another thread sees one listing or the next, never half of one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.devio import device_node

BDF_EXT = struct.Struct("<IIIBB2x")  # nd_index, domain, bus_number, slot, func (+2 bytes of the struct's padding)
IOCTL_DEVICE_BDF_EXT = 0x80084E6A  # _IOR('N', 106, pointer): read, size 8, type 0x4E, number 106
SIM_SUFFIX = ".bdf_ext"
_MAX_ANSWER = 64
_dra_efa: dict[int, str] = {}  # Neuron device index -> its EFA adapter's PCI address (DRA attribute)
assert BDF_EXT.size == 16


def format_address(domain: int, bus: int, slot: int, func: int) -> str:
    """``0000:10:00.0`` (the kernel's name for a PCI function); ValueError when a part is out of PCI's range."""
    if not (0 <= domain <= 0xFFFF and 0 <= bus <= 0xFF and 0 <= slot <= 0x1F and 0 <= func <= 7):
        raise ValueError(f"not a PCI address: domain {domain} bus {bus} slot {slot} function {func}")
    return f"{domain:04x}:{bus:02x}:{slot:02x}.{func}"


def pack_answer(address: str) -> bytes:
    """The 16 bytes the driver copies out for ``address`` (``dddd:bb:ss.f``); the simulator writes them."""
    domain, bus, rest = address.split(":")
    slot, func = rest.split(".")
    return BDF_EXT.pack(0, int(domain, 16), int(bus, 16), int(slot, 16), int(func))


def parse_answer(data: bytes) -> str:
    """The address in a 16-byte answer; a one-line errno name (``EINVAL``) raises that OSError; ValueError else."""
    if len(data) == BDF_EXT.size:
        _index, domain, bus, slot, func = BDF_EXT.unpack(data)
        return format_address(domain, bus, slot, func)
    name = data.strip().decode("ascii", "replace")
    code = getattr(errno, name, None) if name.isascii() and name.isupper() and name.startswith("E") else None
    if isinstance(code, int):
        raise OSError(code, f"{os.strerror(code)} (recorded answer)")
    raise ValueError(f"an answer of {len(data)} bytes, not {BDF_EXT.size}")


def sim_answer_rel(index: int) -> str:
    return f"{L.SIM_IOCTL_DIR}/neuron{index}{SIM_SUFFIX}"


def _ask_driver(fd: int) -> str:
    buf = bytearray(BDF_EXT.size)  # nd_index 0: the descriptor's own device
    fcntl.ioctl(fd, IOCTL_DEVICE_BDF_EXT, buf, True)
    return parse_answer(bytes(buf))


def device_pci_address(root: RootFS, index: int) -> str:
    """Device ``index``'s PCI address from the driver (or its recorded answer); OSError with the errno when it
    cannot be had (no device node, permission, a driver that does not know the ioctl: EINVAL or ENOTTY),
    ValueError when the answer makes no sense."""
    probe, mode = device_node(root, index)  # what it is, without opening it (a FIFO cannot block)
    try:
        if stat.S_ISCHR(mode):
            # O_WRONLY: the driver's free-access lane (no attach); the ioctl only reads the device's PCI coordinates
            fd = os.open(f"/proc/self/fd/{probe}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
            try:
                return _ask_driver(fd)
            finally:
                os.close(fd)
    finally:
        os.close(probe)
    try:
        data = root.read_bytes(sim_answer_rel(index))
    except FileNotFoundError:
        raise OSError(errno.ENOTTY, "not a Neuron character device and no recorded answer") from None
    return parse_answer(data[:_MAX_ANSWER])


def try_pci_address(root: RootFS, index: int) -> tuple[str, str]:
    """(address, "") or ("", why it is unknown) for device ``index``: never raises."""
    try:
        return device_pci_address(root, index), ""
    except OSError as e:
        name = errno.errorcode.get(e.errno or 0, "")
        return "", f"{name}: {e.strerror or e}" if name else str(e.strerror or e)
    except ValueError as e:
        return "", str(e)


def set_dra_efa_addresses(addresses: dict[int, str]) -> None:
    """Publish the DRA listing's device -> EFA adapter addresses (a new dict each time; kept as given)."""
    global _dra_efa
    if addresses != _dra_efa:
        _dra_efa = dict(addresses)


def dra_efa_addresses() -> dict[int, str]:
    """The last published DRA device -> EFA adapter addresses ({} without DRA); never modify it."""
    return _dra_efa
