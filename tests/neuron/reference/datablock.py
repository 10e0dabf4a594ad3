"""Parser of one process's NDS data block (the 256 KiB slab the runtime writes), from any buffer.

`BlockParser(phys_cores).parse(buf)` reads a buffer (an mmap of ``/dev/neuronN`` on a real device or under the
simulator, or bytes in tests) and returns a `BlockReading`: the ND counters, the first 31 NC counters of each
physical core, the tag, and the loaded-model records. Object records are trusted only when their FNV-1a hash
matches (hash 0 = not yet published); a record that fails twice is skipped and the last good copy kept. Parsed
records are cached by their raw bytes, so an unchanged block costs a few struct unpacks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from neuron_monitor.neuron import layout as L

_ND = struct.Struct(f"<{L.ND_COUNTER_COUNT}Q")
_NC_BASE = struct.Struct(f"<{L.NC_BASE_CORES * L.NC_COUNTER_COUNT}Q")
_NC_EXT_CORE = struct.Struct(f"<{L.NC_COUNTER_COUNT}Q")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
ZERO_COUNTERS: tuple[int, ...] = (0,) * L.NC_COUNTER_COUNT


@dataclass(frozen=True, slots=True)
class ModelNode:
    """One loaded-model record (a subgraph of a model on one physical core)."""

    model_id: int
    node_id: int
    name: str
    uuid: str  # 32 hex characters
    nc_index: int  # physical core within the device
    sg_index: int
    host: tuple[int, ...]  # bytes per memory slot (CODE, TENSORS, CONSTANTS, SCRATCHPAD, MISC)
    device: tuple[int, ...]


@dataclass(slots=True)
class BlockReading:
    """What one read of a data block found. ``nc[core]`` holds NC counters 0..30 of that physical core."""

    time: float
    initialized: bool  # the runtime has written the header (signature "nds")
    nd: tuple[int, ...]
    nc: dict[int, tuple[int, ...]]
    tag: str
    models: tuple[ModelNode, ...]


def _cstr(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", "replace")


def parse_process_info(record: bytes) -> str:
    """The tag from the 64-byte process-info record (hash + nds_process_info_t)."""
    _framework, tag = L.PROCESS_INFO_PAYLOAD.unpack_from(record, 4)[:2]
    return _cstr(tag)


def parse_model_record(record: bytes) -> ModelNode:
    model_id, node_id, name, uuid, nc_index, sg_index = L.MODEL_NODE_INFO.unpack_from(record, 4)
    sizes = [
        L.MODEL_MEM_SLOT.unpack_from(record, L.MODEL_MEM_OFFSET + i * L.MODEL_MEM_SLOT.size)[0]
        for i in range(2 * L.MODEL_MEM_SLOTS)
    ]
    return ModelNode(
        model_id=model_id,
        node_id=node_id,
        name=_cstr(name),
        uuid=uuid.hex(),
        nc_index=nc_index,
        sg_index=sg_index,
        host=tuple(sizes[0:5]),
        device=tuple(sizes[L.MODEL_MEM_SLOTS : L.MODEL_MEM_SLOTS + 5]),
    )


class BlockParser:
    """Parses successive reads of one data block; keeps the last good copy of each object record."""

    def __init__(self, phys_cores: int) -> None:
        if not 1 <= phys_cores <= L.MAX_CORES:
            raise ValueError(f"physical cores per device must be 1..{L.MAX_CORES}, got {phys_cores}")
        self.phys_cores = phys_cores
        self._records: dict[int, tuple[bytes, object]] = {}  # offset -> (raw bytes, parsed)

    def _record(self, buf: bytes | memoryview, offset: int, size: int) -> object | None:
        """The parsed record at ``offset`` if published and intact (raw bytes for process/ext records)."""
        for _attempt in range(2):
            raw = bytes(buf[offset : offset + size])
            cached = self._records.get(offset)
            if cached is not None and cached[0] == raw:
                return cached[1]
            stored = _U32.unpack_from(raw, 0)[0]
            if stored == 0:
                return None
            if stored == L.record_hash(raw):
                parsed: object = raw
                if offset >= L.MODEL_RECORDS_OFFSET and offset < L.PROCESS_EXT_OFFSET:
                    parsed = parse_model_record(raw)
                self._records[offset] = (raw, parsed)
                return parsed
        return cached[1] if cached is not None else None

    def parse(self, buf: bytes | memoryview, now: float) -> BlockReading:
        if len(buf) < L.NDS_END:
            raise ValueError(f"data block is {len(buf)} bytes, expected at least {L.NDS_END}")
        initialized = bytes(buf[0:4]) == L.NDS_SIGNATURE
        nd = _ND.unpack_from(buf, L.ND_COUNTERS_OFFSET)
        base = _NC_BASE.unpack_from(buf, L.NC_COUNTERS_OFFSET)
        nc: dict[int, tuple[int, ...]] = {}
        n = L.NC_COUNTER_COUNT
        for core in range(min(self.phys_cores, L.NC_BASE_CORES)):
            nc[core] = base[core * n : (core + 1) * n]
        for core in range(L.NC_BASE_CORES, self.phys_cores):
            off = L.EXT_NC_DATA_OFFSET + (core - L.NC_BASE_CORES) * L.EXT_NC_DATA_STRIDE * 8
            nc[core] = _NC_EXT_CORE.unpack_from(buf, off)
        tag = ""
        models: list[ModelNode] = []
        if initialized:
            ext = self._record(buf, L.PROCESS_EXT_OFFSET, L.PROCESS_EXT_SIZE)
            if isinstance(ext, bytes):
                tag = _cstr(ext[4:])
            if not tag:
                info = self._record(buf, L.PROCESS_INFO_OFFSET, L.PROCESS_INFO_SIZE)
                if isinstance(info, bytes):
                    tag = parse_process_info(info)
            bitmap = _U64.unpack_from(buf, L.MODEL_BITMAP_OFFSET)[0]
            slot = 0
            while bitmap and slot < L.MODEL_SLOTS:
                if bitmap & 1:
                    node = self._record(buf, L.MODEL_RECORDS_OFFSET + slot * L.MODEL_RECORD_SIZE, L.MODEL_RECORD_SIZE)
                    if isinstance(node, ModelNode):
                        models.append(node)
                bitmap >>= 1
                slot += 1
        return BlockReading(time=now, initialized=initialized, nd=nd, nc=nc, tag=tag, models=tuple(models))
