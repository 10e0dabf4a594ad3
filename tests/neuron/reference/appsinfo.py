"""Parser of the GET_ALL_APPS_INFO ioctl result: the processes attached to one Neuron device.

`parse_apps_info(buf, offset)` reads the 16-byte argument header (flags, capacity, size) and ``size`` entries of
``struct neuron_app_info`` (152 bytes: pid, nc_lock_map, four 32-byte model uuids, host and device memory bytes)
and returns `AppInfo` tuples. `parse_acquire_table` reads the simulator's table of ACQUIRE_NEURON_DS results.
"""

from __future__ import annotations

from typing import NamedTuple

from neuron_monitor.neuron import layout as L


class AppInfo(NamedTuple):
    pid: int
    nc_lock_map: int  # bit per locked (running) NeuronCore 0..3
    locked_uuids: tuple[str, ...]  # 32-hex model uuids of the locked cores (the first 16 bytes of each slot)
    host_mem: int
    device_mem: int


def parse_apps_info(buf: bytes | memoryview, offset: int = 0) -> list[AppInfo]:
    _flags, capacity, size = L.APPS_INFO_HEADER.unpack_from(buf, offset)
    count = min(size, capacity, (len(buf) - offset - L.APPS_INFO_HEADER.size) // L.APP_INFO.size)
    out = []
    pos = offset + L.APPS_INFO_HEADER.size
    for _ in range(count):
        pid, lock, uuids, host, device = L.APP_INFO.unpack_from(buf, pos)
        pos += L.APP_INFO.size
        if pid <= 0:
            continue
        locked = tuple(
            uuids[i * L.APP_UUID_SIZE : i * L.APP_UUID_SIZE + 16].hex()
            for i in range(L.APP_INFO_MAX_LOCKED)
            if lock & (1 << i)
        )
        out.append(AppInfo(pid, lock, locked, host, device))
    return out


def parse_acquire_table(buf: bytes | memoryview, offset: int, count: int) -> dict[int, tuple[int, int]]:
    """pid -> (mmap_offset, size) for the entries of the simulator's acquire table (pid 0 ends it)."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(count):
        pid, mmap_offset, size = L.ACQUIRE_DS.unpack_from(buf, offset + i * L.ACQUIRE_DS.size)
        if pid <= 0:
            break
        out[pid] = (mmap_offset, size)
    return out
