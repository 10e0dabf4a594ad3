"""Byte layouts of the driver's per-process interfaces, in one place (facts and sources: docs/neuron-data.md).

- The Neuron DataStore (NDS) block: one 256 KiB slab per process per device, written by the runtime (libnrt),
  read by monitors through a read-only mmap. Counter geometry from the driver's share/neuron_driver_shared.h;
  the objects-section sub-layout (process info, model records, extended process info) from a reverse-engineering
  write-up, consistent with the official struct sizes and the official end offset 44588.
- The GET_ALL_APPS_INFO ioctl argument (16-byte header + 152-byte ``neuron_app_info`` entries) and the
  ACQUIRE_NEURON_DS argument (24 bytes), plus the ioctl request numbers.

Nothing here reads anything; the parser (datablock.py, appsinfo.py) and the simulator's writer both use it.
"""

from __future__ import annotations

import struct

# --- the NDS block ---------------------------------------------------------------------------------------------
NDS_SIZE = 256 * 1024  # NEURON_DATASTORE_SIZE, one slab
NDS_SLOTS = 16  # NEURON_MAX_PROCESS_PER_DEVICE: slabs per device
NDS_SIGNATURE = b"nds\x00"
NDS_VERSION = 100000  # header version value as reported by the RE write-up (not validated)

HEADER_OFFSET = 0  # nds_header_t {char signature[4]; int version;}
ND_COUNTERS_OFFSET = 8
ND_COUNTER_COUNT = 31
NC_COUNTERS_OFFSET = 256  # cores 0-3: 31 counters each
NC_COUNTER_COUNT = 31
NC_BASE_CORES = 4
EXT_NC_COUNTERS_OFFSET = 55936  # cores 0-3, counters 31..94: 64 each
EXT_NC_COUNTER_COUNT = 64
EXT_NC_DATA_OFFSET = 57984  # cores 4-15: 95 counters + 1 pad each (counters 0..94)
EXT_NC_DATA_STRIDE = 96
MAX_CORES = 16
NDS_END = 67200

OBJECTS_START = 1248
OBJECTS_END = 44588  # NDS_EXT_OFFSET_OLD
PROCESS_INFO_OFFSET = 1248  # u32 hash + nds_process_info_t (60 bytes)
PROCESS_INFO_SIZE = 64
MODEL_BITMAP_OFFSET = 1312  # u64, a bit per model slot
MODEL_RECORDS_OFFSET = 1320
MODEL_RECORD_SIZE = 672
MODEL_SLOTS = 64
PROCESS_EXT_OFFSET = 44328  # u32 hash + char tag[256]
PROCESS_EXT_SIZE = 260

# nds_process_info_t, standard C layout: int8 framework_type; char tag[32]; 3 x nds_version_info_t {u8,u8,u32}
PROCESS_INFO_PAYLOAD = struct.Struct("<b32s3x BBxxI BBxxI BBxxI")  # 60 bytes
# nds_model_node_info_t (284 bytes): model_id, model_node_id, name[256], uuid[16], nc_index, sg_index
MODEL_NODE_INFO = struct.Struct("<II256s16sBB2x")
MODEL_MEM_OFFSET = 288  # within a record: 2 locations (host, device) x 12 slots x {u64 total; u32 chunks}
MODEL_MEM_SLOT = struct.Struct("<QI4x")
MODEL_MEM_SLOTS = 12
MEM_LOCATION_HOST = 0
MEM_LOCATION_DEVICE = 1
MEM_SLOT_CODE, MEM_SLOT_TENSORS, MEM_SLOT_CONSTANTS, MEM_SLOT_SCRATCHPAD, MEM_SLOT_MISC = 0, 1, 2, 3, 4

assert PROCESS_INFO_PAYLOAD.size == 60
assert MODEL_NODE_INFO.size == 284
assert MODEL_MEM_OFFSET + 2 * MODEL_MEM_SLOTS * MODEL_MEM_SLOT.size == MODEL_RECORD_SIZE
assert MODEL_RECORDS_OFFSET + MODEL_SLOTS * MODEL_RECORD_SIZE <= PROCESS_EXT_OFFSET
assert PROCESS_EXT_OFFSET + PROCESS_EXT_SIZE == OBJECTS_END
assert EXT_NC_DATA_OFFSET + (MAX_CORES - NC_BASE_CORES) * EXT_NC_DATA_STRIDE * 8 == NDS_END

# ND (device-level, per process) counter indices
ND_RUNTIME_VERSION = 0
ND_MEM_CODE_HOST = 6
ND_MEM_TENSORS_HOST = 7
ND_MEM_CONSTANTS_HOST = 8
ND_MEM_SCRATCHPAD_HOST = 9
ND_MEM_MISC_HOST = 10

# NC (per NeuronCore, per process) counter indices
NC_TIME_IN_USE = 0  # microseconds busy
NC_INFER_COMPLETED = 1
NC_COMPLETED_WITH_ERR = 2
NC_COMPLETED_WITH_NUM_ERR = 3
NC_TIMED_OUT = 4
NC_INCORRECT_INPUT = 5
NC_FAILED_TO_QUEUE = 6
NC_ERR_GENERIC = 7
NC_ERR_NUMERICAL = 8
NC_ERR_MODEL = 9
NC_ERR_TRANSIENT = 10
NC_ERR_HW = 11
NC_ERR_RT = 12
NC_LATENCY_DEVICE = 13  # most recent execution, microseconds (set, not added)
NC_LATENCY_TOTAL = 14
NC_MEM_CODE_DEVICE = 22
NC_MEM_TENSORS_DEVICE = 23
NC_MEM_CONSTANTS_DEVICE = 24
NC_MEM_SCRATCHPAD_DEVICE = 25
NC_MEM_MISC_DEVICE = 26
NC_MODEL_LOAD_COUNT = 27
NC_INFERENCE_COUNT = 28
NC_MAC_COUNT = 29
NC_HW_ERR_HBM_UE = 32

# execution_stats mapping (field -> NC counter), in AWS's key order
EXECUTION_SUMMARY: tuple[tuple[str, int], ...] = (
    ("completed", NC_INFER_COMPLETED),
    ("completed_with_err", NC_COMPLETED_WITH_ERR),
    ("completed_with_num_err", NC_COMPLETED_WITH_NUM_ERR),
    ("timed_out", NC_TIMED_OUT),
    ("incorrect_input", NC_INCORRECT_INPUT),
    ("failed_to_queue", NC_FAILED_TO_QUEUE),
)
ERROR_SUMMARY: tuple[tuple[str, int], ...] = (
    ("generic", NC_ERR_GENERIC),
    ("numerical", NC_ERR_NUMERICAL),
    ("transient", NC_ERR_TRANSIENT),
    ("model", NC_ERR_MODEL),
    ("runtime", NC_ERR_RT),
    ("hardware", NC_ERR_HW),
)
# counters that only grow (deltas per period); the rest are gauges or "last value" samples
CUMULATIVE_NC_COUNTERS: tuple[int, ...] = (
    NC_TIME_IN_USE,
    *(c for _, c in EXECUTION_SUMMARY),
    *(c for _, c in ERROR_SUMMARY),
    NC_MODEL_LOAD_COUNT,
    NC_INFERENCE_COUNT,
    NC_MAC_COUNT,
)
DEVICE_MEM_COUNTERS: tuple[tuple[str, int], ...] = (
    ("constants", NC_MEM_CONSTANTS_DEVICE),
    ("model_code", NC_MEM_CODE_DEVICE),
    ("model_shared_scratchpad", NC_MEM_SCRATCHPAD_DEVICE),
    ("runtime_memory", NC_MEM_MISC_DEVICE),
    ("tensors", NC_MEM_TENSORS_DEVICE),
)
HOST_MEM_COUNTERS: tuple[tuple[str, int], ...] = (
    ("application_memory", ND_MEM_MISC_HOST),
    ("constants", ND_MEM_CONSTANTS_HOST),
    ("dma_buffers", ND_MEM_CODE_HOST),
    ("tensors", ND_MEM_TENSORS_HOST),
)


def nc_counter_offset(core: int, counter: int) -> int:
    """Byte offset of NC counter ``counter`` of physical core ``core`` (the kernel's get_neuroncore_counter_value)."""
    if not 0 <= core < MAX_CORES:
        raise ValueError(f"core {core} out of range")
    if core < NC_BASE_CORES:
        if counter < NC_COUNTER_COUNT:
            return NC_COUNTERS_OFFSET + (core * NC_COUNTER_COUNT + counter) * 8
        if counter < NC_COUNTER_COUNT + EXT_NC_COUNTER_COUNT:
            return EXT_NC_COUNTERS_OFFSET + (core * EXT_NC_COUNTER_COUNT + counter - NC_COUNTER_COUNT) * 8
        raise ValueError(f"counter {counter} out of range")
    if counter < EXT_NC_DATA_STRIDE - 1:
        return EXT_NC_DATA_OFFSET + ((core - NC_BASE_CORES) * EXT_NC_DATA_STRIDE + counter) * 8
    raise ValueError(f"counter {counter} out of range")


def nd_counter_offset(counter: int) -> int:
    if not 0 <= counter < ND_COUNTER_COUNT:
        raise ValueError(f"ND counter {counter} out of range")
    return ND_COUNTERS_OFFSET + counter * 8


# --- the apps-info and acquire ioctls -------------------------------------------------------------------------
APPS_INFO_HEADER = struct.Struct("<H2xII4x")  # apps_info_flags, capacity, size
APP_INFO = struct.Struct("<iB128s3xQQ")  # pid, nc_lock_map, uuid_data[4][32], host_mem_size, device_mem_size
APP_UUID_SIZE = 32
APP_INFO_MAX_LOCKED = 4
APP_INFO_ALL = 0xF
ACQUIRE_DS = struct.Struct("<i4xQI4x")  # pid, mmap_offset, size
assert APPS_INFO_HEADER.size == 16
assert APP_INFO.size == 152
assert ACQUIRE_DS.size == 24

IOCTL_GET_ALL_APPS_INFO = 0x80084E07
IOCTL_ACQUIRE_NEURON_DS = 0x80084E47
IOCTL_RELEASE_NEURON_DS = 0x80084E48

# The simulator's stand-in for the two ioctls: <root>/dev/neuron-sim/neuronN.ioctl holds, at offset 0, a u64
# generation, then the GET_ALL_APPS_INFO argument buffer (header + NDS_SLOTS entries), then NDS_SLOTS acquire
# results, then the generation again (a reader retries while the two differ: a torn read).
SIM_GENERATION = struct.Struct("<Q")
SIM_APPS_OFFSET = 8
SIM_ACQUIRE_OFFSET = SIM_APPS_OFFSET + APPS_INFO_HEADER.size + NDS_SLOTS * APP_INFO.size
SIM_TRAILER_OFFSET = SIM_ACQUIRE_OFFSET + NDS_SLOTS * ACQUIRE_DS.size
SIM_IOCTL_FILE_SIZE = SIM_TRAILER_OFFSET + SIM_GENERATION.size
SIM_IOCTL_DIR = "dev/neuron-sim"


def fnv1a32(data: bytes | memoryview) -> int:
    """FNV-1a 32-bit hash (basis 0x811c9dc5, prime 0x01000193), as the runtime stamps NDS object records."""
    h = 0x811C9DC5
    for b in bytes(data):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def record_hash(record: bytes | memoryview) -> int:
    """The hash of a record: FNV-1a over the record with its leading u32 hash field zeroed."""
    return fnv1a32(b"\x00\x00\x00\x00" + bytes(record[4:]))
