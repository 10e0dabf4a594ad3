"""The data-block and apps-info parsers on hand-built buffers (offsets written out here, not taken from layout.py)
and on bytes written by the simulator's writer."""

from __future__ import annotations

import struct

import pytest

from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.appsinfo import parse_acquire_table, parse_apps_info
from neuron_monitor.neuron.datablock import BlockParser, parse_model_record
from neuron_monitor.sim.datastore import AppEntry, IoctlFile, ModelRecord, SlabWriter

SLAB = 256 * 1024


def fnv(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def publish(buf: bytearray, offset: int, payload: bytes) -> None:
    buf[offset + 4 : offset + 4 + len(payload)] = payload
    struct.pack_into("<I", buf, offset, fnv(b"\0\0\0\0" + payload))


def hand_block() -> bytearray:
    buf = bytearray(SLAB)
    buf[0:4] = b"nds\0"
    struct.pack_into("<i", buf, 4, 100000)
    struct.pack_into("<Q", buf, 8 + 6 * 8, 1048576)  # ND 6: MEM_USAGE_CODE_HOST (dma_buffers)
    struct.pack_into("<Q", buf, 8 + 10 * 8, 609656832)  # ND 10: MISC_HOST (application_memory)
    # core 1, counter 1 (completed) in the base region: 256 + (1*31 + 1) * 8
    struct.pack_into("<Q", buf, 256 + (1 * 31 + 1) * 8, 260)
    # core 0, TIME_IN_USE
    struct.pack_into("<Q", buf, 256 + 0, 123456)
    # core 5 (ext data region): 57984 + ((5-4)*96 + c) * 8
    struct.pack_into("<Q", buf, 57984 + (1 * 96 + 29) * 8, 777)  # MAC_COUNT
    struct.pack_into("<Q", buf, 57984 + (1 * 96 + 8) * 8, 3)  # ERR_NUMERICAL
    # process info at 1248: int8 framework, tag[32] at payload +1
    info = struct.pack("<b32s3xBBxxIBBxxIBBxxI", 1, b"short-tag", 2, 1, 5, 2, 1, 5, 2, 20, 7)
    assert len(info) == 60
    publish(buf, 1248, info)
    return buf


def test_counters_from_base_and_extended_regions() -> None:
    r = BlockParser(8).parse(hand_block(), now=1.0)
    assert r.initialized
    assert r.nd[6] == 1048576 and r.nd[10] == 609656832
    assert r.nc[1][1] == 260
    assert r.nc[0][0] == 123456
    assert r.nc[5][29] == 777 and r.nc[5][8] == 3
    assert set(r.nc) == set(range(8))
    assert r.time == 1.0


def test_tag_prefers_extended_info_then_process_info() -> None:
    buf = hand_block()
    assert BlockParser(2).parse(buf, 0).tag == "short-tag"
    long_tag = "x" * 200
    publish(buf, 44328, long_tag.encode().ljust(256, b"\0"))
    assert BlockParser(2).parse(buf, 0).tag == long_tag


def test_unpublished_or_corrupt_records_are_ignored() -> None:
    buf = hand_block()
    struct.pack_into("<I", buf, 1248, 0)  # hash 0: not published
    assert BlockParser(2).parse(buf, 0).tag == ""
    buf = hand_block()
    buf[1250] ^= 0xFF  # corrupt the payload: hash mismatch
    assert BlockParser(2).parse(buf, 0).tag == ""


def test_corrupt_record_keeps_last_good_copy() -> None:
    buf = hand_block()
    parser = BlockParser(2)
    assert parser.parse(buf, 0).tag == "short-tag"
    buf[1252] ^= 0xFF
    assert parser.parse(buf, 1).tag == "short-tag"


def model_payload(model_id: int, name: bytes, uuid: bytes, nc: int, sg: int) -> bytes:
    info = struct.pack("<II256s16sBB2x", model_id, sg, name, uuid, nc, sg)
    mem = bytearray(384)
    struct.pack_into("<QI4x", mem, (0 * 12 + 4) * 16, 20608, 1)  # host MISC -> application_memory
    struct.pack_into("<QI4x", mem, (1 * 12 + 2) * 16, 98304, 1)  # device CONSTANTS
    struct.pack_into("<QI4x", mem, (1 * 12 + 0) * 16, 53632, 1)  # device CODE
    return info + bytes(mem)


def test_model_records_follow_the_bitmap() -> None:
    buf = hand_block()
    uuid = bytes.fromhex("2b28572e7dd811edb0250e0372b2eb59")
    publish(buf, 1320 + 0 * 672, model_payload(10002, b"modA", uuid, 0, 0))
    publish(buf, 1320 + 3 * 672, model_payload(10001, b"modB", uuid, 1, 1))
    publish(buf, 1320 + 5 * 672, model_payload(10009, b"notListed", uuid, 1, 0))
    struct.pack_into("<Q", buf, 1312, 0b1001)
    models = BlockParser(2).parse(buf, 0).models
    assert [(m.model_id, m.name, m.nc_index, m.sg_index) for m in models] == [
        (10002, "modA", 0, 0),
        (10001, "modB", 1, 1),
    ]
    m = models[0]
    assert m.uuid == "2b28572e7dd811edb0250e0372b2eb59"
    assert m.host[4] == 20608 and m.device[2] == 98304 and m.device[0] == 53632


def test_uninitialized_block_has_counters_but_no_objects() -> None:
    buf = hand_block()
    buf[0:4] = b"\0\0\0\0"
    r = BlockParser(2).parse(buf, 0)
    assert not r.initialized and r.tag == "" and r.models == ()
    assert r.nc[1][1] == 260


def test_short_buffer_is_an_error() -> None:
    with pytest.raises(ValueError, match="expected at least"):
        BlockParser(2).parse(bytes(1000), 0)


def test_apps_info_hand_built() -> None:
    buf = bytearray(16 + 3 * 152)
    struct.pack_into("<H2xII4x", buf, 0, 0xF, 3, 2)  # flags, capacity, size (2 entries valid)
    uuid = bytes(range(16)) + bytes(16)
    struct.pack_into("<iB128s3xQQ", buf, 16, 4242, 0b0010, bytes(32) + uuid + bytes(64), 9043968, 3541303936)
    struct.pack_into("<iB128s3xQQ", buf, 16 + 152, 17, 0, bytes(128), 0, 0)
    struct.pack_into("<iB128s3xQQ", buf, 16 + 304, 99, 0, bytes(128), 0, 0)  # beyond size: ignored
    apps = parse_apps_info(bytes(buf))
    assert [a.pid for a in apps] == [4242, 17]
    assert apps[0].host_mem == 9043968 and apps[0].device_mem == 3541303936
    assert apps[0].locked_uuids == (bytes(range(16)).hex(),)


def test_acquire_table_stops_at_pid_zero() -> None:
    buf = bytearray(3 * 24)
    struct.pack_into("<i4xQI4x", buf, 0, 10, 3 * SLAB, SLAB)
    struct.pack_into("<i4xQI4x", buf, 48, 11, 0, SLAB)
    assert parse_acquire_table(bytes(buf), 0, 3) == {10: (3 * SLAB, SLAB)}


def test_simulator_bytes_round_trip(tmp_path) -> None:
    slab = bytearray(SLAB)
    w = SlabWriter(memoryview(slab))
    w.init_process(runtime_version=22000)
    w.write_process_info("trainer-7")
    for core in range(8):
        w.set_nc(core, L.NC_INFER_COMPLETED, 100 + core)
        w.set_nc(core, L.NC_MAC_COUNT, 1 << 40)
    w.set_nd(L.ND_MEM_MISC_HOST, 12345)
    model = ModelRecord(10005, 0, "neff", bytes.fromhex("91f2f66e83ea419dace1da07617ad39f"), 6, 2,
                        {L.MEM_SLOT_MISC: 20480}, {L.MEM_SLOT_CONSTANTS: 20971520, L.MEM_SLOT_CODE: 29504})  # fmt: skip
    w.write_model(7, model)
    r = BlockParser(8).parse(slab, 0)
    assert r.tag == "trainer-7"
    assert [r.nc[c][L.NC_INFER_COMPLETED] for c in range(8)] == [100 + c for c in range(8)]
    assert r.nc[7][L.NC_MAC_COUNT] == 1 << 40
    assert r.nd[L.ND_MEM_MISC_HOST] == 12345
    (m,) = r.models
    assert (m.model_id, m.name, m.uuid, m.nc_index, m.sg_index) == (10005, "neff", model.uuid.hex(), 6, 2)
    assert m.device[L.MEM_SLOT_CONSTANTS] == 20971520
    # the driver >= 2.30 release keeps cumulative NC counters, clears the objects and memory
    w.release(keep_nc_counters=True)
    r2 = BlockParser(8).parse(slab, 1)
    assert not r2.initialized and r2.models == () and r2.nd[L.ND_MEM_MISC_HOST] == 0
    assert r2.nc[3][L.NC_INFER_COMPLETED] == 103
    w.release(keep_nc_counters=False)
    assert not any(slab)
    # the ioctl file
    f = IoctlFile(str(tmp_path / "neuron0.ioctl"))
    f.write([AppEntry(pid=321, nc_lock_map=1, uuids=(model.uuid,), host_mem=5, device_mem=6, slot=3), AppEntry(77)])
    data = (tmp_path / "neuron0.ioctl").read_bytes()
    f.close()
    apps = parse_apps_info(data, L.SIM_APPS_OFFSET)
    assert [(a.pid, a.host_mem, a.device_mem, a.locked_uuids) for a in apps] == [
        (321, 5, 6, (model.uuid.hex(),)),
        (77, 0, 0, ()),
    ]
    assert parse_acquire_table(data, L.SIM_ACQUIRE_OFFSET, 16) == {321: (3 * SLAB, SLAB)}


def test_model_record_parser_alone() -> None:
    rec = bytearray(672)
    publish(rec, 0, model_payload(1, b"m", bytes(16), 2, 3))
    m = parse_model_record(bytes(rec))
    assert (m.model_id, m.nc_index, m.sg_index, m.host[4]) == (1, 2, 3, 20608)


def test_layout_offsets_match_the_driver_geometry() -> None:
    assert L.nc_counter_offset(0, 0) == 256
    assert L.nc_counter_offset(3, 30) == 256 + (3 * 31 + 30) * 8
    assert L.nc_counter_offset(2, 32) == 55936 + (2 * 64 + 1) * 8
    assert L.nc_counter_offset(15, 94) == 57984 + (11 * 96 + 94) * 8
    with pytest.raises(ValueError):
        L.nc_counter_offset(16, 0)
