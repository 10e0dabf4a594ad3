"""The device side of a capture: each ``/dev/neuronN``'s ioctl answers and attached processes' data blocks,
written in the simulator's form so an extracted capture replays them (neuron/devio.py `SimFileDevice`).

Per device: ``dev/neuronN`` (a regular file holding the data blocks back to back, at compact offsets),
``dev/neuron-sim/neuronN.ioctl`` (the GET_ALL_APPS_INFO answer and the ACQUIRE_NEURON_DS answers with those
offsets, in layout.py's simulator format) and ``dev/neuron-sim/neuronN.bdf_ext`` (the DEVICE_BDF_EXT answer or
the errno name it got). Each process's block is read once per device it is attached to (one copy of each).
With redaction, the runtime tags and model names inside each block are replaced (`redact.py`) and the records'
hashes computed again, so the replayed blocks parse as the host's did.
"""

from __future__ import annotations

import errno

from neuron_monitor.capture.redact import Redactor
from neuron_monitor.capture.walk import Collector
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.appsinfo import AppInfo
from neuron_monitor.neuron.devio import open_device
from neuron_monitor.neuron.pci import SIM_SUFFIX, pack_answer, try_pci_address


def _ioctl_file(apps: list[AppInfo], acquired: dict[int, tuple[int, int]]) -> bytes:
    buf = bytearray(L.SIM_IOCTL_FILE_SIZE)
    L.SIM_GENERATION.pack_into(buf, 0, 1)
    entries = apps[: L.NDS_SLOTS]
    L.APPS_INFO_HEADER.pack_into(buf, L.SIM_APPS_OFFSET, L.APP_INFO_ALL, L.NDS_SLOTS, len(entries))
    k = 0
    for i, app in enumerate(entries):
        uuids = bytearray(L.APP_INFO_MAX_LOCKED * L.APP_UUID_SIZE)
        locked = iter(app.locked_uuids)
        for core in range(L.APP_INFO_MAX_LOCKED):
            if app.nc_lock_map & (1 << core):
                raw = bytes.fromhex(next(locked, ""))[:16]
                uuids[core * L.APP_UUID_SIZE : core * L.APP_UUID_SIZE + len(raw)] = raw
        off = L.SIM_APPS_OFFSET + L.APPS_INFO_HEADER.size + i * L.APP_INFO.size
        L.APP_INFO.pack_into(buf, off, app.pid, app.nc_lock_map, bytes(uuids), app.host_mem, app.device_mem)
        if app.pid in acquired:
            offset, size = acquired[app.pid]
            L.ACQUIRE_DS.pack_into(buf, L.SIM_ACQUIRE_OFFSET + k * L.ACQUIRE_DS.size, app.pid, offset, size)
            k += 1
    L.SIM_GENERATION.pack_into(buf, L.SIM_TRAILER_OFFSET, 1)
    return bytes(buf)


def capture_devices(root: RootFS, devices: tuple[int, ...], out: Collector, redactor: Redactor) -> set[int]:
    """Add every device's answers and blocks to ``out``; returns the pids that have a data block."""
    pids: set[int] = set()
    for index in devices:
        address, why = try_pci_address(root, index)
        name = why.split(":", 1)[0] if why else ""
        answer = pack_answer(address) if address else f"{name if name in errno.__dict__ else 'EINVAL'}\n".encode()
        out.add_bytes(f"{L.SIM_IOCTL_DIR}/neuron{index}{SIM_SUFFIX}", answer)
        try:
            device = open_device(root, index)
        except OSError as e:
            out.skip(f"dev/neuron{index}", e.strerror or str(e))
            continue
        try:
            try:
                apps = device.list_apps()
            except OSError as e:
                out.skip(f"dev/neuron{index} GET_ALL_APPS_INFO", e.strerror or str(e))
                continue
            blocks = bytearray()
            acquired: dict[int, tuple[int, int]] = {}
            for app in apps[: L.NDS_SLOTS]:
                try:
                    got = device.acquire(app.pid)
                    if got is None:
                        continue
                    offset, size = got
                    if not 0 < size <= L.NDS_SIZE:
                        out.skip(f"dev/neuron{index} pid {app.pid}", f"a data block of {size} bytes")
                        continue
                    mapping = device.map_block(offset, size)
                except (OSError, ValueError) as e:
                    out.skip(f"dev/neuron{index} pid {app.pid}", str(e))
                    continue
                try:
                    block = bytearray(mapping.read()[:size])
                except OSError as e:  # a file that shrank under us: a short read
                    out.skip(f"dev/neuron{index} pid {app.pid}", str(e))
                    continue
                finally:
                    mapping.close()
                redactor.block(block)
                acquired[app.pid] = (len(blocks), L.NDS_SIZE)
                blocks += block.ljust(L.NDS_SIZE, b"\x00")
                pids.add(app.pid)
            out.add_bytes(f"dev/neuron{index}", bytes(blocks))
            out.add_bytes(f"{L.SIM_IOCTL_DIR}/neuron{index}.ioctl", _ioctl_file(apps, acquired))
        finally:
            device.close()
    return pids
