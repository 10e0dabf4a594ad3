"""Recordings sent by someone else, read by neuron-monitor-trace, neuron-monitor-det and top's replay: a gzip bomb,
a line that never ends, a FIFO or a device given as the recording.

Before: the reader held a line until its newline came, and inflated a whole 1 MiB read of a gzip member at once.
A 3 MB gzip file inflating to 3 GB of one line took neuron-monitor-det to 6.1 GB peak RSS (16 s) before it said
"no reports found"; ``/dev/zero`` as a recording grew without end; a FIFO blocked the open until a writer came.
After: a line past the exporters' 32 MiB cap on a report line is dropped while it streams in (counted as a bad
line), a member is inflated at most 1 MiB at a time, and a recording must be a regular file (one line naming it
otherwise): the same bomb peaks at 55 MB.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

from neuron_monitor.timeline import recording
from neuron_monitor.timeline.recording import RecordingReader

from ..timeline.factory import T0, Rt, record, report
from ..timeline.test_cli import run as _run
from .peak_rss import launched, peak

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def _gzip_member(parts: list[tuple[bytes, int]]) -> bytes:
    """One gzip member holding each (chunk, times) in turn, compressed as it goes (never held inflated)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = []
    for chunk, times in parts:
        out.extend(comp.compress(chunk) for _ in range(times))
    out.append(comp.flush())
    return b"".join(out)


def _good_lines(tmp_path: Path) -> bytes:
    import gzip

    rec = record(tmp_path / "good.gz", [report(T0 + 1, [Rt(100, "train", [3])])])
    return gzip.decompress(rec.read_bytes())


@pytest.mark.parametrize("form", ["gzip", "plain"])
def test_a_line_past_the_cap_is_dropped_as_it_streams_and_the_next_record_is_read(
    tmp_path: Path, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40 MiB line (the cap lowered to 1 MiB) between two files' worth of nothing and a good record: the good
    record is read, the long line is one bad line, and the reader never held more than a few MiB."""
    monkeypatch.setattr(recording, "MAX_LINE_BYTES", MIB, raising=False)
    good = _good_lines(tmp_path)
    path = tmp_path / f"rec.{form}"
    if form == "gzip":
        path.write_bytes(_gzip_member([(b'{"a":"', 1), (b"x" * MIB, 40), (b'"}\n' + good, 1)]))
    else:
        with path.open("wb") as f:
            f.write(b'{"a":"')
            for _ in range(40):
                f.write(b"x" * MIB)
            f.write(b'"}\n' + good)
    reader = RecordingReader([path])
    tracemalloc.start()
    try:
        got = list(reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r["report_time"] for r in got] == [T0 + 1]
    assert reader.stats.bad_lines == 1 and reader.stats.errors == []
    assert peak < 12 * MIB, f"the reader held {peak / MIB:.0f} MiB for a line it drops"


def test_a_gzip_bomb_is_a_bounded_no_reports_for_det(tmp_path: Path) -> None:
    """A small gzip file inflating to 256 MiB of one unterminated line: neuron-monitor-det (a real process) says
    there is no report, exit 2, one line; its peak RSS stays far below what it inflates to."""
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(_gzip_member([(b'{"a":"', 1), (b"x" * MIB, 256)]))
    assert bomb.stat().st_size < MIB
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("wb") as o, err.open("wb") as e:
        det = [sys.executable, "-m", "neuron_monitor.timeline.det_cli", str(bomb)]
        proc = subprocess.Popen(launched(det, tmp_path / "peak"), stdout=o, stderr=e, env=env)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    said = err.read_text()
    assert proc.returncode == 2, said
    assert "no reports found" in said and "Traceback" not in said
    assert out.read_text() == ""
    rss = peak(tmp_path / "peak")  # det's own, not the test process's (tests/hostile/peak_rss.py)
    assert rss < 200 * MIB, f"det peaked at {rss / MIB:.0f} MiB reading a bomb of 256 MiB inflated"


@pytest.mark.parametrize("module", ["det_cli", "trace_cli"])
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_fifo_or_device_as_a_recording_is_named_and_never_read(tmp_path: Path, module: str, kind: str) -> None:
    """Named on one line, at once, then "no reports" (trace's exit 1, det's 2): a FIFO with no writer (the open
    does not wait) and /dev/zero (never read: it has no end and no newline)."""
    if kind == "fifo":
        path = tmp_path / "rec.gz"
        os.mkfifo(path)
        what = "is a FIFO, not a regular file"
    else:
        path = Path("/dev/zero")
        what = "is a character device, not a regular file"
    args = [str(path)] + (["-o", str(tmp_path / "t.json")] if module == "trace_cli" else [])
    p = _run(module, *args)
    assert p.returncode == (2 if module == "det_cli" else 1), p.stderr
    assert f"{path}: {what}" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "character device"])
def test_a_record_path_that_is_no_regular_file_is_exit_2_and_left_alone(tmp_path: Path, kind: str) -> None:
    """``neuron-monitor --record PATH`` where PATH is a FIFO (the open waited for a reader, and SIGTERM did not end
    it: still running 10 minutes later), a directory (the start-up rotation renamed it PATH.1) or a device:
    one line, exit 2, PATH untouched."""
    if kind == "fifo":
        path = tmp_path / "rec.gz"
        os.mkfifo(path)
    elif kind == "directory":
        path = tmp_path / "logs"
        path.mkdir()
        (path / "kept").write_text("x")
    else:
        path = Path("/dev/null")  # --once writes one report: the old code appended it there, never rotated it
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", "trn1.2xlarge", "--once"]
    p = subprocess.run(
        [*cmd, "--record", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    words = {"fifo": "a FIFO", "directory": "a directory", "character device": "a character device"}[kind]
    assert p.returncode == 2, p.stderr
    assert p.stderr.endswith(f"neuron-monitor: --record {path}: is {words}, not a regular file\n")
    assert p.stdout == ""
    if kind == "directory":
        assert (path / "kept").read_text() == "x" and not (tmp_path / "logs.1").exists()


@pytest.mark.parametrize("module", ["det_cli", "trace_cli"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_output_that_is_no_regular_file_is_refused_and_left_alone(tmp_path: Path, module: str, kind: str) -> None:
    """``-o PATH`` is written beside PATH and renamed over it: before, a FIFO or a device node there was replaced
    by the trace (``-o /dev/null`` as root replaced /dev/null with a regular file). Now exit 2 with one line."""
    rec = record(tmp_path / "rec.gz", [report(T0 + 1, [Rt(100, "train", [3])])])
    path = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    p = _run(module, str(rec), "-o", str(path))
    words = "a FIFO" if kind == "fifo" else "a directory"
    assert p.returncode == 2, p.stderr
    assert f"{path}: is {words}, not a regular file (left as it is; -o - writes to stdout)" in p.stderr
    mode = path.lstat().st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISDIR(mode)
