"""Counter files under `--root` (the driver's sysfs) hold one unsigned decimal number; anything else is named.

Before (issue 32): the one-pass fast path's int() on raw bytes took a sign, spaces and "_" that the careful parser
refused: "-5" gave used_bytes -5, success -5, a negative busy ratio or 65,531 phantom repairable ECC errors; 2^64-1
gave 1.8e19 in one period; one file past 64 bits dropped the whole group for all devices; a removed
status/success/total was reported as 0 with an empty error, a removed memory total silently left out. After: one
parser (`parse_counter`, batch twin `parse_counters`, equivalence tested), a bad file is named in the group's
error and only its value is left out (0 for the ECC counts of neuron_hw_counters, whose files are all counts), a
delta past what the hardware counts is named, a missing or removed file is named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.neuron_device_telemetry.collector import UNLINK_CHECKS, NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.telemetry_files import MAX_COUNTER, parse_counter, parse_counters
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files

BAD = [b"-5\n", b"+5\n", b" 5\n", b"5 \n", b"1_0\n", b"\t5\n", b"5\r\n", b"0x10\n", b"\xd9\xa5\n", b"\n", b""]
BAD += [b"5\n6\n", b"18446744073709551616\n", b"99999999999999999999999\n"]  # the last two: past 64 bits
GOOD = [b"0\n", b"7", b"\n42\n", b"18446744073709551615\n"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=24) | st.sampled_from([*BAD, *GOOD])))
def test_the_batch_parser_accepts_exactly_what_the_careful_one_does(raws: list[bytes]) -> None:
    careful: list[int | None] = []
    for raw in raws:
        try:
            careful.append(parse_counter(raw))
        except ValueError:
            careful.append(None)
    batch = parse_counters(raws)
    if None in careful:
        assert batch is None
    else:
        assert batch == careful


@pytest.mark.parametrize("raw", BAD)
def test_the_careful_parser_refuses_every_other_form(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_counter(raw)


def test_a_file_as_long_as_the_read_goes_to_the_careful_path() -> None:
    assert parse_counters([b"0" * 63 + b"\n"], 64) is None  # it may have been cut: read it in full
    assert parse_counters([b"0" * 62 + b"\n"], 64) == [0]


def test_the_largest_counter_is_read() -> None:
    assert parse_counter(b"18446744073709551615\n") == MAX_COUNTER
    assert parse_counters([b"18446744073709551615\n", b"0"]) == [MAX_COUNTER, 0]


def build(root: Path) -> list[DeviceTree]:
    shape = get_shape("inf2.24xlarge")  # 6 devices of 2 cores
    write_host_files(root, shape, "2.30.2.0", shape.lnc)
    return [DeviceTree(root, shape, i, "2.30.2.0") for i in range(shape.devices)]


def numbers(obj: Any) -> list[float]:
    if isinstance(obj, dict):
        return [n for v in obj.values() for n in numbers(v)]
    if isinstance(obj, list):
        return [n for v in obj for n in numbers(v)]
    return [obj] if isinstance(obj, int | float) and not isinstance(obj, bool) else []


@pytest.fixture
def tree(tmp_path: Path) -> Any:
    devs = build(tmp_path)
    yield tmp_path, devs
    for d in devs:
        d.close()


@pytest.mark.parametrize("raw", BAD)
def test_a_bad_status_file_is_named_and_only_its_value_left_out(tree: Any, raw: bytes) -> None:
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    g.prime()
    devs[5].core_files[1]["status/success"].write(raw)
    devs[5].core_files[1]["status/timeout"].write(b"3\n")
    body = g.collect()
    assert "neuron5/neuron_core1/stats/status/success/total" in body["error"]
    orjson.dumps(body)  # encodes: no value past 64 bits
    assert all(n >= 0 for n in numbers(body))
    core = body["neuron_devices"][5]["neuroncores"][str(5 * 2 + 1)]
    assert "success" not in core["execution_status"] and core["execution_status"]["timeout"] == 3
    assert all("error" not in d for d in body["neuron_devices"])  # every other device still reported
    assert len(body["neuron_devices"]) == 6


@pytest.mark.parametrize("raw", [b"-5\n", b"1_0\n", b"18446744073709551616\n"])
def test_bad_memory_and_ecc_files_are_named(tree: Any, raw: bytes) -> None:
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    g.prime()
    devs[2].host_mem["tensors"][0].write(raw)
    devs[3].ecc["mem_ecc_repairable_uncorrected"].write(raw)
    body = g.collect()
    assert "host_mem/tensors/total" in body["error"] and "mem_ecc_repairable_uncorrected" in body["error"]
    assert all(n >= 0 for n in numbers(body)) and 65531 not in numbers(body)
    orjson.dumps(body)


def test_jumps_past_what_the_hardware_counts_are_named(tree: Any) -> None:
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    g.prime()
    devs[0].core_files[0]["status/success"].write(b"18446744073709551615\n")
    devs[1].host_mem["tensors"][0].write(b"18446744073709551615\n")
    devs[4].ecc["mem_ecc_repairable_uncorrected"].write(b"18446744073709551615\n")
    body = g.collect()
    error = body["error"]
    assert "status/success/total: holds 18446744073709551615, past what it can" in error
    assert "host_mem/tensors/total: 18446744073709551615 bytes" in error
    assert "mem_ecc_repairable_uncorrected: holds 18446744073709551615, past what it can (262140)" in error
    assert max(numbers(body)) < 2**53


def test_a_removed_status_file_is_named(tree: Any) -> None:
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    g.prime()
    files = len(g._plan.files) if g._plan else 0
    path = devs[4].dir / "neuron_core0/stats/status/success/total"
    path.unlink()
    named = False
    for _ in range(files // UNLINK_CHECKS + 2):  # the rotation reaches every kept file
        body = g.collect()
        if "status/success/total" in body.get("error", ""):
            named = True
            break
    assert named
    body = g.collect()  # looked for again: named as not exposed from now on
    assert "status/success/total" in body["error"] and "neuron_device 4" in body["error"]


def test_a_removed_memory_total_is_named(tree: Any) -> None:
    root, devs = tree
    (devs[2].dir / "stats/memory_usage/host_mem/tensors/total").unlink()
    g = NeuronDeviceTelemetry(RootFS(root))
    body = g.collect()
    assert "memory_usage/host_mem/tensors/total not exposed by the driver for neuron_device 2" in body["error"]


@pytest.mark.parametrize("raw", [b"-5\n", b" 5\n", b"1_0\n", b"18446744073709551616\n"])
def test_hw_counters_name_a_bad_file_and_count_nothing_from_it(tree: Any, raw: bytes) -> None:
    root, devs = tree
    g = NeuronHwCounters(RootFS(root))
    g.prime()
    g.collect()  # the fast pass is set up
    devs[3].ecc["mem_ecc_corrected"].write(raw)
    body = g.collect()
    assert "mem_ecc_corrected of neuron_device 3" in body["error"]
    assert "mem_ecc_corrected" not in body["neuron_devices"][3]  # not read: left out, never 0
    assert all(n >= 0 for n in numbers(body)) and max(numbers(body)) < 2**16
    devs[3].ecc["mem_ecc_corrected"].write(b"4\n")
    g.collect()  # the counter is good again: its baseline
    devs[3].ecc["mem_ecc_corrected"].write(b"6\n")
    assert g.collect()["neuron_devices"][3]["mem_ecc_corrected"] == 2


def test_hw_counters_name_a_jump_past_sixteen_bits(tree: Any) -> None:
    root, devs = tree
    g = NeuronHwCounters(RootFS(root))
    g.prime()
    devs[5].ecc["sram_ecc_uncorrected"].write(b"18446744073709551615\n")
    body = g.collect()
    assert (
        "sram_ecc_uncorrected of neuron_device 5: holds 18446744073709551615, past what it can (65535)" in body["error"]
    )
    assert "sram_ecc_uncorrected" not in body["neuron_devices"][5]  # refused: left out, never a count
    devs[5].ecc["sram_ecc_uncorrected"].write(b"4\n")
    assert g.collect()["neuron_devices"][5]["sram_ecc_uncorrected"] == 0  # a new baseline
    devs[5].ecc["sram_ecc_uncorrected"].write(b"6\n")
    assert g.collect()["neuron_devices"][5]["sram_ecc_uncorrected"] == 2
