"""Recorder and reader: round trip, rotation, live reading, crash and disk-full safety."""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.timeline import recording
from neuron_monitor.timeline.recording import Recorder, RecordingReader, iter_recording, recording_files


def noise(i: int, n: int) -> str:
    """``n`` characters that deflate poorly (so that sizes and rotation are exercised)."""
    out = ""
    while len(out) < n:
        out += hashlib.sha256(f"{i}/{len(out)}".encode()).hexdigest()
    return out[:n]


def line(i: int, pad: int = 0) -> bytes:
    return orjson.dumps({"report_time": 1000.0 + i, "system_data": {"n": i, "pad": noise(i, pad)}}) + b"\n"


def times(path: Path | list[Path]) -> list[float]:
    return [r["report_time"] for r in iter_recording(path)]


def test_round_trip_is_standard_gzip(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    with Recorder(rec) as r:
        for i in range(50):
            r.append(line(i))
    assert times(rec) == [1000.0 + i for i in range(50)]
    # a closed recording is a complete, valid gzip file: zcat/gzip read it with CRC checks
    assert gzip.decompress(rec.read_bytes()) == b"".join(line(i) for i in range(50))


def test_live_file_is_readable_after_each_append(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    r = Recorder(rec)
    for i in range(5):
        r.append(line(i, pad=3000))
        reader = RecordingReader([rec])
        assert [x["report_time"] for x in reader] == [1000.0 + k for k in range(i + 1)]
        assert reader.stats.truncated_tails == 1  # the member is still open
    r.close()


def test_rotation_keeps_every_record_in_order(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    with Recorder(rec, max_bytes=2000, keep=100) as r:
        for i in range(300):
            r.append(line(i, pad=200))
    files = recording_files(rec)
    assert len(files) > 3
    assert files[-1] == rec and files[0].name == f"rec.gz.{len(files) - 1}"
    assert times(rec) == [1000.0 + i for i in range(300)]
    for f in files:  # every rotated file is a complete gzip file
        gzip.decompress(f.read_bytes())


def test_rotation_drops_only_beyond_keep(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    with Recorder(rec, max_bytes=1500, keep=2) as r:
        for i in range(200):
            r.append(line(i, pad=200))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.gz", "rec.gz.1", "rec.gz.2"]
    got = times(rec)
    assert got == sorted(got) and got[-1] == 1199.0
    assert got == [1000.0 + i for i in range(int(got[0]) - 1000, 200)]  # a contiguous, newest suffix


def test_restart_rotates_the_earlier_file(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    r1 = Recorder(rec)
    r1.append(line(0))
    r1.append(line(1))
    # simulate a crash: no close, the member stays unfinished
    r2 = Recorder(rec)
    r2.append(line(2))
    r2.close()
    assert (tmp_path / "rec.gz.1").exists()
    assert times(rec) == [1000.0, 1001.0, 1002.0]


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_crash_at_any_byte_loses_only_the_torn_record(tmp_path_factory: pytest.TempPathFactory, cut: int) -> None:
    d = tmp_path_factory.mktemp("crash")
    rec = d / "rec.gz"
    r = Recorder(rec, max_bytes=10**9)
    ends: list[int] = []
    for i in range(20):
        r.append(line(i, pad=100 + 37 * i))
        ends.append(rec.stat().st_size)
    data = rec.read_bytes()
    cut = cut % (len(data) + 1)
    (d / "torn.gz").write_bytes(data[:cut])
    complete = sum(1 for e in ends if e <= cut)
    got = times(d / "torn.gz")
    # every complete record survives; the torn one is either whole (only its flush marker was cut) or absent
    assert got in ([1000.0 + i for i in range(complete)], [1000.0 + i for i in range(complete + 1)])


def test_disk_full_drops_the_record_and_keeps_the_file_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = tmp_path / "rec.gz"
    r = Recorder(rec)
    r.append(line(0, pad=500))
    r.append(line(1, pad=500))
    real_write = os.write
    failures = {"n": 2}

    def flaky_write(fd: int, data: bytes) -> int:
        if failures["n"] > 0:
            failures["n"] -= 1
            half = max(1, len(data) // 2)
            real_write(fd, bytes(data[:half]))  # a torn write, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(recording.os, "write", flaky_write)
    with pytest.raises(OSError, match="No space left"):
        r.append(line(2, pad=500))
    with pytest.raises(OSError, match="No space left"):  # finishing the torn member fails too
        r.append(line(3, pad=500))
    r.append(line(4, pad=500))
    r.append(line(5, pad=500))
    r.close()
    assert r.dropped == 2 and "No space left" in r.last_error
    assert times(rec) == [1000.0, 1001.0, 1004.0, 1005.0]
    assert gzip.decompress(rec.read_bytes()).count(b"\n") == 4  # two complete members, CRCs right


def test_plain_json_lines_and_bad_lines(tmp_path: Path) -> None:
    f = tmp_path / "out.jsonl"
    f.write_bytes(line(0) + b"not json\n" + b"[1,2]\n\n" + line(1) + b'{"report_time": 10')
    reader = RecordingReader([f])
    assert [x["report_time"] for x in reader] == [1000.0, 1001.0]
    assert reader.stats.bad_lines == 2 and reader.stats.truncated_tails == 1


def test_corrupt_gzip_is_reported_not_raised(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    with Recorder(rec) as r:
        for i in range(10):
            r.append(line(i, pad=2000))
    data = bytearray(rec.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 40] = b"\xff" * 40
    (tmp_path / "bad.gz").write_bytes(bytes(data))
    reader = RecordingReader([tmp_path / "bad.gz", tmp_path / "missing.gz"])
    got = [x["report_time"] for x in reader]
    assert got == [1000.0 + i for i in range(len(got))] and len(got) < 10
    assert any("corrupt" in e for e in reader.stats.errors)
    assert any("missing.gz" in e for e in reader.stats.errors)


def test_naming_a_rotated_file_reads_that_file_only(tmp_path: Path) -> None:
    rec = tmp_path / "rec.gz"
    with Recorder(rec, max_bytes=1000, keep=10) as r:
        for i in range(60):
            r.append(line(i, pad=200))
    only = times(tmp_path / "rec.gz.1")
    assert only and only == sorted(only) and len(only) < 60
    # naming both the base and a rotated file reads each file once
    assert times([rec, tmp_path / "rec.gz.1"]) == [1000.0 + i for i in range(60)]
