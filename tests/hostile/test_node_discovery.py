"""Hostile trees for the discovery of the driver's nodes (neuron/discovery.py): the bounded search cannot be made
to hang, loop, leave ``--root`` or guess.

- wide: a directory with more entries than the search reads (`MAX_ENTRIES`): it stops there and says so (the read
  count is the bound: a million entries cost what 20,000 do);
- deep: a chain of directories deeper than `MAX_DEPTH`: not followed past it, and it says so;
- symlink loops (``loop -> .``, ``up -> ..``) and links out of the root (to ``/`` and to a host file named like a
  node): never followed, never a candidate;
- a FIFO (and a socket) named like a node: never a candidate, nothing blocks on it; at a known place it is named
  as unreadable, not waited on;
- duplicate candidates: that node's error, the other nodes still read.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health.collector import NeuronDeviceHealth
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import discovery as D
from neuron_monitor.neuron import nodes as N
from tests.neuron.layouts import DEVICES, REGROUPED, build

DEV = "sys/class/neuron_device/neuron0"


@pytest.fixture
def moved(tmp_path: Path) -> Path:
    """A trn1.2xlarge whose ECC, power and memory nodes were moved (so that finding them takes the search)."""
    build(tmp_path, "trn1.2xlarge", "2.30.2.0", REGROUPED)
    return tmp_path


def test_a_wide_directory_stops_the_search_at_its_bound(moved: Path) -> None:
    wide = moved / DEVICES / "neuron0" / "aaa_wide"
    wide.mkdir()
    for i in range(D.MAX_ENTRIES + 5_000):
        (wide / f"f{i}").touch()
    result = D.search(RootFS(moved), DEV)
    assert result.read == D.MAX_ENTRIES + 1  # the bound: never more, however many entries there are
    assert result.stopped == f"search stopped after {D.MAX_ENTRIES} entries"
    body = NeuronHwCounters(RootFS(moved)).collect()  # the group still answers, naming what it could not find
    assert "error" in body


def test_a_deep_chain_is_not_followed_past_the_bound(moved: Path) -> None:
    deep = moved / DEVICES / "neuron0"
    for i in range(D.MAX_DEPTH + 12):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "hardware").mkdir()
    (deep / "hardware" / "mem_ecc_corrected").write_bytes(b"7\n")  # a decoy too deep to be seen
    result = D.search(RootFS(moved), DEV)
    assert "no deeper than" in result.stopped
    assert all(len(path) <= D.MAX_DEPTH for paths in result.entries.values() for path, _ in paths)
    nodes = D.DeviceNodes(RootFS(moved), DEV)
    assert nodes.find(N.MEM_ECC_CORRECTED).rel == f"{DEV}/stats/counters/hardware/mem_ecc_corrected"


def test_symlink_loops_and_links_out_of_the_root_are_never_followed(
    moved: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "hardware").mkdir()
    (outside / "hardware" / "sram_ecc_corrected").write_bytes(b"99\n")
    dev = moved / DEVICES / "neuron0"
    os.symlink(".", dev / "loop")
    os.symlink("..", dev / "up")
    os.symlink("/", dev / "slash")
    os.symlink(outside, dev / "outside")
    os.symlink(outside / "hardware" / "sram_ecc_corrected", dev / "stats" / "counters" / "hardware" / "x")
    (dev / "stats" / "counters" / "hardware" / "sram_ecc_corrected").unlink()
    os.symlink(
        outside / "hardware" / "sram_ecc_corrected", dev / "stats" / "counters" / "hardware" / "sram_ecc_corrected"
    )
    result = D.search(RootFS(moved), DEV)
    assert not result.stopped and result.read < 2_000
    assert all(
        not any(p in ("loop", "up", "slash", "outside") for p in path) for v in result.entries.values() for path, _ in v
    )
    body = NeuronHwCounters(RootFS(moved)).collect()
    assert "sram_ecc_corrected" not in body["neuron_devices"][0]  # the linked host file is never read
    assert "sram_ecc_corrected not exposed by the driver for neuron_device 0" in body["error"]
    assert body["neuron_devices"][0]["mem_ecc_uncorrected"] == 0


def test_a_fifo_or_socket_named_like_a_node_is_no_candidate(moved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = moved / DEVICES / "neuron0" / "stats" / "counters" / "hardware"
    (hw / "mem_ecc_corrected").unlink()
    os.mkfifo(hw / "mem_ecc_corrected")
    (hw / "sram_ecc_corrected").unlink()
    with socket.socket(socket.AF_UNIX) as s:
        monkeypatch.chdir(hw)  # a socket path is limited to 108 bytes
        s.bind("sram_ecc_corrected")
        g = NeuronHwCounters(RootFS(moved))
        body = g.collect()
    entry = body["neuron_devices"][0]
    assert "mem_ecc_corrected" not in entry and "sram_ecc_corrected" not in entry
    assert entry["mem_ecc_uncorrected"] == 0
    assert g.sources()["found"]["hardware/mem_ecc_corrected"] is False


def test_a_fifo_at_the_known_place_is_named_not_waited_on(tmp_path: Path) -> None:
    build(tmp_path, "trn2.48xlarge", "2.30.2.0")
    hw = tmp_path / DEVICES / "neuron1" / "stats" / "hardware"
    (hw / "health_status" / "unhealthy_components").unlink()
    os.mkfifo(hw / "health_status" / "unhealthy_components")
    body = NeuronDeviceHealth(RootFS(tmp_path), clock=lambda: 1000.0).collect()
    dev = next(d for d in body[K.NEURON_DEVICES] if d[K.DEVICE_INDEX] == 1)
    assert dev[K.HEALTH][K.STATE] == "unknown"
    assert ("signal_unreadable", "unhealthy_components") in [(r["rule"], r["detail"]) for r in dev[K.HEALTH][K.REASONS]]


def test_duplicate_candidates_are_that_nodes_error_only(moved: Path) -> None:
    dev = moved / DEVICES / "neuron0"
    for where in ("x/power", "y/z/power"):
        (dev / where).mkdir(parents=True)
        (dev / where / "utilization").write_bytes(b"POWER_STATUS_VALID,1789180860,1.00,2.00,3.00\n")
    body = NeuronDeviceHealth(RootFS(moved), clock=lambda: 1000.0).collect()
    (device,) = body[K.NEURON_DEVICES]
    reasons = [(r["rule"], r["detail"], r["message"]) for r in device[K.HEALTH][K.REASONS]]
    assert len(reasons) == 1 and reasons[0][:2] == ("signal_missing", "power/utilization")
    assert "3 candidates" in reasons[0][2]
