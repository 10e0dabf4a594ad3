"""The simulator's writer of driver-format bytes: NDS slabs (in place, through a shared mmap) and the ioctl file.

`SlabWriter` writes one 256 KiB NDS slab the way the runtime does (header, ND/NC counters, process info, model
records with their FNV-1a hash) and clears it the way the driver does on process exit (old drivers zero the
whole slab; driver >= 2.30.2 keeps the cumulative NC counters). `IoctlFile` writes the bytes the
GET_ALL_APPS_INFO and ACQUIRE_NEURON_DS ioctls would return, framed by a generation counter.
Layout constants come from neuron_monitor/neuron/layout.py; the decoding side is separate code.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass

from neuron_monitor.neuron import layout as L

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class SlabWriter:
    """Writes one NDS slab through a writable memoryview of the device file's shared mapping."""

    def __init__(self, view: memoryview) -> None:
        if len(view) != L.NDS_SIZE:
            raise ValueError("a slab view must be exactly NDS_SIZE bytes")
        self.view = view

    def init_process(self, runtime_version: int) -> None:
        self.view[0:4] = L.NDS_SIGNATURE
        struct.pack_into("<i", self.view, 4, L.NDS_VERSION)
        self.set_nd(L.ND_RUNTIME_VERSION, runtime_version)

    def set_nd(self, counter: int, value: int) -> None:
        _U64.pack_into(self.view, L.nd_counter_offset(counter), value)

    def set_nc(self, core: int, counter: int, value: int) -> None:
        _U64.pack_into(self.view, L.nc_counter_offset(core, counter), value)

    def get_nc(self, core: int, counter: int) -> int:
        value: int = _U64.unpack_from(self.view, L.nc_counter_offset(core, counter))[0]
        return value

    def write_process_info(
        self, tag: str, framework_type: int = 1, versions: tuple[int, int, int] = (2, 20, 0)
    ) -> None:
        short = tag.encode()[:31]
        payload = L.PROCESS_INFO_PAYLOAD.pack(framework_type, short, *versions, *versions, *versions)
        self._write_record(L.PROCESS_INFO_OFFSET, payload)
        ext = tag.encode()[:255].ljust(256, b"\x00")
        self._write_record(L.PROCESS_EXT_OFFSET, ext)

    def write_model(self, slot: int, model: ModelRecord) -> None:
        info = L.MODEL_NODE_INFO.pack(
            model.model_id, model.node_id, model.name.encode()[:255], model.uuid, model.nc_index, model.sg_index
        )
        mem = bytearray(2 * L.MODEL_MEM_SLOTS * L.MODEL_MEM_SLOT.size)
        for loc, sizes in ((L.MEM_LOCATION_HOST, model.host), (L.MEM_LOCATION_DEVICE, model.device)):
            for mem_slot, size in sizes.items():
                L.MODEL_MEM_SLOT.pack_into(mem, (loc * L.MODEL_MEM_SLOTS + mem_slot) * L.MODEL_MEM_SLOT.size, size, 1)
        payload = info + b"\x00" * (L.MODEL_MEM_OFFSET - 4 - len(info)) + bytes(mem)
        offset = L.MODEL_RECORDS_OFFSET + slot * L.MODEL_RECORD_SIZE
        self._write_record(offset, payload)
        bitmap = _U64.unpack_from(self.view, L.MODEL_BITMAP_OFFSET)[0]
        _U64.pack_into(self.view, L.MODEL_BITMAP_OFFSET, bitmap | (1 << slot))

    def remove_model(self, slot: int) -> None:
        bitmap = _U64.unpack_from(self.view, L.MODEL_BITMAP_OFFSET)[0]
        _U64.pack_into(self.view, L.MODEL_BITMAP_OFFSET, bitmap & ~(1 << slot))
        offset = L.MODEL_RECORDS_OFFSET + slot * L.MODEL_RECORD_SIZE
        self.view[offset : offset + L.MODEL_RECORD_SIZE] = bytes(L.MODEL_RECORD_SIZE)

    def _write_record(self, offset: int, payload: bytes) -> None:
        """Unpublish (hash 0), write the payload, then publish the hash: a reader never trusts a half record."""
        _U32.pack_into(self.view, offset, 0)
        self.view[offset + 4 : offset + 4 + len(payload)] = payload
        _U32.pack_into(self.view, offset, L.fnv1a32(b"\x00\x00\x00\x00" + payload) or 1)

    def release(self, keep_nc_counters: bool) -> None:
        """What the driver does when the owner exits: zero all, or (>= 2.30.2) all but the cumulative NC counters."""
        if not keep_nc_counters:
            self.view[0 : L.NDS_END] = bytes(L.NDS_END)
            return
        self.view[0 : L.NC_COUNTERS_OFFSET] = bytes(L.NC_COUNTERS_OFFSET)
        self.view[L.OBJECTS_START : L.OBJECTS_END] = bytes(L.OBJECTS_END - L.OBJECTS_START)
        for core in range(L.MAX_CORES):
            for _, counter in L.DEVICE_MEM_COUNTERS:
                self.set_nc(core, counter, 0)


@dataclass
class ModelRecord:
    model_id: int
    node_id: int
    name: str
    uuid: bytes  # 16 raw bytes
    nc_index: int  # physical core within the device
    sg_index: int
    host: dict[int, int]  # memory slot -> bytes
    device: dict[int, int]


@dataclass
class AppEntry:
    """One GET_ALL_APPS_INFO entry plus the slab it acquired (None: an opener without a datastore)."""

    pid: int
    nc_lock_map: int = 0
    uuids: tuple[bytes, ...] = ()
    host_mem: int = 0
    device_mem: int = 0
    slot: int | None = None


class IoctlFile:
    """<root>/dev/neuron-sim/neuronN.ioctl: what the two ioctls return, rewritten in place with one pwrite."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.generation = 0
        self.write([])

    def write(self, entries: list[AppEntry]) -> None:
        self.generation += 1
        buf = bytearray(L.SIM_IOCTL_FILE_SIZE)
        L.SIM_GENERATION.pack_into(buf, 0, self.generation)
        L.APPS_INFO_HEADER.pack_into(buf, L.SIM_APPS_OFFSET, L.APP_INFO_ALL, L.NDS_SLOTS, len(entries))
        acquire_i = 0
        for i, e in enumerate(entries[: L.NDS_SLOTS]):
            uuids = b"".join(u.ljust(L.APP_UUID_SIZE, b"\x00") for u in e.uuids[: L.APP_INFO_MAX_LOCKED])
            off = L.SIM_APPS_OFFSET + L.APPS_INFO_HEADER.size + i * L.APP_INFO.size
            L.APP_INFO.pack_into(buf, off, e.pid, e.nc_lock_map, uuids, e.host_mem, e.device_mem)
            if e.slot is not None:
                off = L.SIM_ACQUIRE_OFFSET + acquire_i * L.ACQUIRE_DS.size
                L.ACQUIRE_DS.pack_into(buf, off, e.pid, e.slot * L.NDS_SIZE, L.NDS_SIZE)
                acquire_i += 1
        L.SIM_GENERATION.pack_into(buf, L.SIM_TRAILER_OFFSET, self.generation)
        os.pwrite(self.fd, bytes(buf), 0)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:  # dropped without close(): the descriptor goes back all the same
        with contextlib.suppress(OSError, AttributeError):
            self.close()
