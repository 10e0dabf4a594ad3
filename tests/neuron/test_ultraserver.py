"""UltraServer identity: the driver's class attribute files (real formats from aws-neuron-driver
v3/neuron_pelect.c and v2/neuron_dhal_v2.c) -> instance_info keys; the simulator's trn2u shape; the daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.ultraserver import (
    BUSY,
    CLASS_DIR,
    InstanceInfoWithUltraServer,
    UltraServer,
    UltraServerSource,
    parse_ultraserver,
    read_files,
)

REPO = Path(__file__).resolve().parents[2]
# what a non-UltraServer host (trn1, inf2, trn2 standard platform) prints: "-1\n", "%016llx" of 0, "\n"
STANDARD = {
    "node_id_4": b"-1\n",
    "server_id_4": b"0000000000000000\n",
    "node_id_2": b"-1\n",
    "server_id_2": b"0000000000000000\n",
    "ultraserver_mode": b"\n",
}
# node 2 of a 4-node pod that supports X4, X2H and X1 ("%d,"-joined mode numbers, last comma removed)
MEMBER = {
    "node_id_4": b"2\n",
    "server_id_4": b"cafb07773a569a23\n",
    "node_id_2": b"0\n",
    "server_id_2": b"1d2e3f4a5b6c7d8e\n",
    "ultraserver_mode": b"1,2,4\n",
}
# an election in progress: node ids and modes say "busy", server ids read as zero
ELECTING = {
    "node_id_4": b"busy\n",
    "server_id_4": b"0000000000000000\n",
    "node_id_2": b"busy\n",
    "server_id_2": b"0000000000000000\n",
    "ultraserver_mode": b"busy\n",
}


def test_member_of_a_four_node_pod() -> None:
    found = parse_ultraserver(dict(MEMBER))
    assert found == UltraServer("cafb07773a569a23", 4, 2, ("X4", "X2H", "X1"))
    assert isinstance(found, UltraServer)
    assert found.instance_fields() == {
        "ultraserver_id": "u-cafb07773a569a23",
        "ultraserver_node_id": 2,
        "ultraserver_node_count": 4,
        "ultraserver_modes": "X4,X2H,X1",
    }


def test_two_node_pod_only() -> None:
    files = dict(MEMBER, server_id_4=b"0000000000000000\n", node_id_4=b"-1\n", ultraserver_mode=b"3,4\n")
    assert parse_ultraserver(files) == UltraServer("1d2e3f4a5b6c7d8e", 2, 0, ("X2V", "X1"))


def test_standard_host_missing_files_and_garbage_are_not_ultraservers() -> None:
    assert parse_ultraserver(dict(STANDARD)) is None
    assert parse_ultraserver(dict.fromkeys(STANDARD)) is None  # driver without the class attributes
    assert parse_ultraserver({}) is None
    for bad in (b"invalid\n", b"xyz\n", b"cafb07773a569a2\n", b"cafb07773a569a23ff\n", b"\xff" * 16, b""):
        assert parse_ultraserver(dict(MEMBER, server_id_4=bad, server_id_2=bad)) is None, bad
    # a node id the driver could not give leaves the pod id standing
    found = parse_ultraserver(dict(MEMBER, node_id_4=b"invalid\n"))
    assert isinstance(found, UltraServer) and found.node_id is None
    assert found.instance_fields()["ultraserver_node_id"] == -1


def test_election_in_progress_is_busy() -> None:
    assert parse_ultraserver(dict(ELECTING)) is BUSY


def write_class_files(root: Path, files: dict[str, bytes]) -> None:
    d = root / CLASS_DIR
    d.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (d / name).write_bytes(raw)


def test_source_rereads_on_its_cadence_and_keeps_the_identity_through_an_election(tmp_path: Path) -> None:
    now = [100.0]
    source = UltraServerSource(RootFS(tmp_path), refresh=10.0, clock=lambda: now[0])
    assert source.get() is None  # no files at all
    write_class_files(tmp_path, MEMBER)
    assert source.get() is None  # not re-read before the refresh interval
    now[0] += 10.0
    member = source.get()
    assert member is not None and member.server_id == "cafb07773a569a23"
    write_class_files(tmp_path, ELECTING)
    now[0] += 10.0
    assert source.get() == member  # busy: the last identity stays
    write_class_files(tmp_path, STANDARD)
    now[0] += 10.0
    assert source.get() is None  # left the pod


def test_a_fifo_in_place_of_a_class_file_does_not_block(tmp_path: Path) -> None:
    write_class_files(tmp_path, {k: v for k, v in MEMBER.items() if k != "node_id_4"})
    os.mkfifo(tmp_path / CLASS_DIR / "node_id_4")
    files = read_files(RootFS(tmp_path))
    assert files["node_id_4"] in (None, b"")
    assert parse_ultraserver(files) == UltraServer("cafb07773a569a23", 4, None, ("X4", "X2H", "X1"))


def test_instance_info_gets_the_keys_and_is_rebuilt_only_on_change(tmp_path: Path) -> None:
    base = {"instance_id": "i-0123456789abcdef0", "error": ""}
    now = [0.0]
    source = UltraServerSource(RootFS(tmp_path), refresh=1.0, clock=lambda: now[0])
    info = InstanceInfoWithUltraServer(lambda: base, source)
    assert info() is base  # not an UltraServer: AWS's object unchanged
    write_class_files(tmp_path, MEMBER)
    now[0] += 1.0
    first = info()
    assert first["ultraserver_id"] == "u-cafb07773a569a23" and first["instance_id"] == "i-0123456789abcdef0"
    now[0] += 1.0
    assert info() is first  # same base, same identity: the same object (reports splice it unchanged)
    assert "ultraserver_id" not in base


@pytest.mark.e2e
@pytest.mark.parametrize(("shape", "expected"), [("trn2u.48xlarge", "u-9ff5434815c8bd80"), ("trn2.48xlarge", None)])
def test_daemon_reports_the_simulated_ultraserver(shape: str, expected: str | None) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", shape, "--once", "--no-imds"],
        capture_output=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    info = orjson.loads(proc.stdout.splitlines()[-1])["instance_info"]
    assert info.get("ultraserver_id") == expected
    if expected:
        assert info["ultraserver_node_count"] == 4 and info["ultraserver_node_id"] == 0
