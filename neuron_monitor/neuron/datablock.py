"""Parser of one process's NDS data block (the 256 KiB slab the runtime writes), from any buffer.

`BlockParser(phys_cores).parse(buf, now)` reads a buffer (an mmap of ``/dev/neuronN`` on a real device or under
the simulator, or bytes in tests) and returns a `BlockReading`: the host-memory ND counters, NC counters 0..30 of
every physical core (one flat ``array("Q")``, core-major), the tag, and the loaded-model records.

Cost. The block is written by another process, so every cache line read is likely a miss, and every value made
an int object is allocated now and freed a collection later. So: the NC counters are copied as raw bytes into an
array (one copy for cores 0-3, one per core from 4 on), ints are made only for what a group picks; one
``unpack_from`` from offset 0 takes the signature, the host-memory ND counters, the process info's hash and the
model bitmap; one (a struct cached per bitmap, pad bytes skipped, not read) takes the hash fields of the bitmap's
model records and of the extended process info. Object records are trusted only when their FNV-1a hash matches
(hash 0 = not yet published); a record that fails twice is skipped and the last good copy kept. Parsed records
are cached by their stored hash, and while no hash, no bitmap bit and no verification failure changed since the
last read, the tag and models are not looked at again.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from mmap import mmap

from neuron_monitor.neuron import layout as L

N = L.NC_COUNTER_COUNT  # NC counters per physical core in BlockReading.counters
_CORE_BYTES = N * 8
ReadableBuffer = bytes | bytearray | memoryview | mmap  # what `BlockParser.parse` reads from
_SWAP = sys.byteorder != "little"  # the block is little-endian
# ND counters read: the host memory ones (memory_used)
ND_KEPT: tuple[int, ...] = tuple(range(L.ND_MEM_CODE_HOST, L.ND_MEM_MISC_HOST + 1))
ND_POS: dict[int, int] = {c: i for i, c in enumerate(ND_KEPT)}
_ND = "".join("Q" if c in ND_POS else "8x" for c in range(L.ND_COUNTER_COUNT))
_MODEL_SIZES = struct.Struct("<" + "Q8x" * (2 * L.MODEL_MEM_SLOTS))  # the u64 totals of MODEL_MEM_SLOT
assert L.MODEL_MEM_SLOT.size == 16
_HASH = struct.Struct("<I")
_HEAD_OBJECTS = f"I{L.PROCESS_INFO_SIZE - 4}xQ"  # the process info's hash field, the model bitmap
assert L.PROCESS_INFO_OFFSET + L.PROCESS_INFO_SIZE == L.MODEL_BITMAP_OFFSET
assert L.MODEL_BITMAP_OFFSET + 8 == L.MODEL_RECORDS_OFFSET
_MAX_TAILS = 256


def _tail(bitmap: int) -> struct.Struct:
    """From MODEL_RECORDS_OFFSET: the hash field of each model record in ``bitmap``, then the extended process
    info's. Pad bytes are skipped, not read, so only the cache lines holding those fields are touched."""
    fmt = "".join(
        f"I{L.MODEL_RECORD_SIZE - 4}x" if bitmap >> slot & 1 else f"{L.MODEL_RECORD_SIZE}x"
        for slot in range(L.MODEL_SLOTS)
    )
    return struct.Struct("<" + fmt + "I")


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
    """What one read of a data block found.

    ``counters[core * N + c]`` is NC counter ``c`` (0..30) of physical core ``core``: an ``array("Q")`` copied
    from the block (no int object per counter until one is used) or, for merged and test readings, a tuple.
    ``nc`` gives the same as a dict of per-core tuples (built on demand, for cold paths and tests).
    """

    time: float
    initialized: bool  # the runtime has written the header (signature "nds")
    nd_values: tuple[int, ...]  # ``nd_values[ND_POS[c]]`` is ND counter ``c`` (one of ND_KEPT)
    counters: Sequence[int]
    tag: str
    models: tuple[ModelNode, ...]

    @property
    def cores(self) -> int:
        return len(self.counters) // N

    @property
    def nd(self) -> tuple[int | None, ...]:
        """The ND counters by index, None for those not read."""
        v = self.nd_values
        return tuple(v[ND_POS[i]] if i in ND_POS else None for i in range(L.ND_COUNTER_COUNT))

    @property
    def nc(self) -> dict[int, tuple[int, ...]]:
        c = self.counters
        return {core: tuple(c[core * N : core * N + N]) for core in range(len(c) // N)}


def zero_counters(cores: int) -> tuple[int, ...]:
    return (0,) * (cores * N)


def _cstr(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", "replace")


def parse_process_info(record: bytes) -> str:
    """The tag from the 64-byte process-info record (hash + nds_process_info_t)."""
    _framework, tag = L.PROCESS_INFO_PAYLOAD.unpack_from(record, 4)[:2]
    return _cstr(tag)


def parse_model_record(record: bytes) -> ModelNode:
    model_id, node_id, name, uuid, nc_index, sg_index = L.MODEL_NODE_INFO.unpack_from(record, 4)
    sizes = _MODEL_SIZES.unpack_from(record, L.MODEL_MEM_OFFSET)
    return ModelNode(
        model_id=model_id,
        node_id=node_id,
        name=_cstr(name),
        uuid=uuid.hex(),
        nc_index=nc_index,
        sg_index=sg_index,
        host=sizes[0:5],
        device=sizes[L.MODEL_MEM_SLOTS : L.MODEL_MEM_SLOTS + 5],
    )


def _ext_tag(record: bytes) -> str:
    return _cstr(record[4:])


class BlockParser:
    """Parses successive reads of one data block; keeps the last good copy of each object record."""

    def __init__(self, phys_cores: int) -> None:
        if not 1 <= phys_cores <= L.MAX_CORES:
            raise ValueError(f"physical cores per device must be 1..{L.MAX_CORES}, got {phys_cores}")
        self.phys_cores = phys_cores
        base = min(phys_cores, L.NC_BASE_CORES)
        assert L.ND_COUNTERS_OFFSET + L.ND_COUNTER_COUNT * 8 == L.NC_COUNTERS_OFFSET
        assert L.NC_COUNTERS_OFFSET + L.NC_BASE_CORES * _CORE_BYTES == L.OBJECTS_START
        # from offset 0: signature, version (skipped), the host-memory ND counters, process info hash, bitmap
        self._head = struct.Struct("<4s4x" + _ND + f"{L.NC_BASE_CORES * _CORE_BYTES}x" + _HEAD_OBJECTS)
        # NC counters 0..30 of each core: cores 0-3 are contiguous, cores 4-15 one per extended-region stride
        self._base_end = L.NC_COUNTERS_OFFSET + base * _CORE_BYTES
        self._ext_at = tuple(L.EXT_NC_DATA_OFFSET + k * L.EXT_NC_DATA_STRIDE * 8 for k in range(phys_cores - base))
        self._tails: dict[int, struct.Struct] = {}  # bitmap -> its _tail
        self._nd_end = 1 + len(ND_KEPT)
        self._records: dict[int, tuple[int, object]] = {}  # offset -> (stored hash, parsed)
        # object keys (process info hash, bitmap, hashes of the bitmap's records, extended info hash) of the
        # last read whose records all verified
        self._keys: tuple[int, ...] | None = None
        self._tag = ""
        self._models: tuple[ModelNode, ...] = ()
        self._clean = True

    def _record(self, buf: ReadableBuffer, offset: int, size: int, stored: int) -> object | None:
        """The parsed record at ``offset`` if published and intact, else its last good copy (or None)."""
        if stored == 0:
            return None
        cached = self._records.get(offset)
        if cached is not None and cached[0] == stored:
            return cached[1]  # the same hash: the same record (a torn rewrite would not verify either)
        for _attempt in range(2):
            raw = bytes(buf[offset : offset + size])
            stored = _HASH.unpack_from(raw, 0)[0]
            if stored == 0:
                return None
            if cached is not None and cached[0] == stored:
                return cached[1]
            if stored == L.record_hash(raw):
                parsed: object = raw
                if L.MODEL_RECORDS_OFFSET <= offset < L.PROCESS_EXT_OFFSET:
                    parsed = parse_model_record(raw)
                self._records[offset] = (stored, parsed)
                return parsed
        self._clean = False  # read it again next time even if no hash changes
        return cached[1] if cached is not None else None

    def _objects(self, buf: ReadableBuffer, keys: tuple[int, ...]) -> None:
        self._clean = True
        tag = ""
        ext = self._record(buf, L.PROCESS_EXT_OFFSET, L.PROCESS_EXT_SIZE, keys[-1])
        if isinstance(ext, bytes):
            tag = _ext_tag(ext)
        if not tag:
            info = self._record(buf, L.PROCESS_INFO_OFFSET, L.PROCESS_INFO_SIZE, keys[0])
            if isinstance(info, bytes):
                tag = parse_process_info(info)
        models: list[ModelNode] = []
        bitmap = keys[1]
        slot = 0
        at = 2  # the next record hash in keys
        while bitmap and slot < L.MODEL_SLOTS:
            if bitmap & 1:
                offset = L.MODEL_RECORDS_OFFSET + slot * L.MODEL_RECORD_SIZE
                node = self._record(buf, offset, L.MODEL_RECORD_SIZE, keys[at])
                at += 1
                if isinstance(node, ModelNode):
                    models.append(node)
            bitmap >>= 1
            slot += 1
        self._tag = tag
        found = tuple(models)
        self._models = self._models if found == self._models else found  # the same object while unchanged
        self._keys = keys if self._clean else None

    def parse(self, buf: ReadableBuffer, now: float) -> BlockReading:
        if len(buf) < L.NDS_END:
            raise ValueError(f"data block is {len(buf)} bytes, expected at least {L.NDS_END}")
        head = self._head.unpack_from(buf, 0)
        nd_end = self._nd_end
        counters = array("Q")
        counters.frombytes(buf[L.NC_COUNTERS_OFFSET : self._base_end])
        for at in self._ext_at:
            counters.frombytes(buf[at : at + _CORE_BYTES])
        if _SWAP:
            counters.byteswap()
        initialized = head[0] == L.NDS_SIGNATURE
        if not initialized:
            return BlockReading(now, False, head[1:nd_end], counters, "", ())
        bitmap = head[-1]
        tail = self._tails.get(bitmap)
        if tail is None:
            if len(self._tails) >= _MAX_TAILS:
                self._tails.clear()
            tail = self._tails[bitmap] = _tail(bitmap)
        keys = head[nd_end:] + tail.unpack_from(buf, L.MODEL_RECORDS_OFFSET)
        if keys != self._keys:
            self._objects(buf, keys)
        return BlockReading(now, True, head[1:nd_end], counters, self._tag, self._models)
