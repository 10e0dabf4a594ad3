"""neuron-monitor-trace and neuron-monitor-det as real processes: outputs, exit codes, bad usage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.timeline.recording import Recorder

from . import tef
from .factory import T0, Rt, record, report

REPO = Path(__file__).resolve().parents[2]


def run(module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run(
        [sys.executable, "-m", f"neuron_monitor.timeline.{module}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


def faulty(n: int = 10) -> list[dict[str, Any]]:
    return [report(T0 + i, [Rt(100, "train", [3], errors={"numerical": 1} if i in (2, 3) else {})]) for i in range(n)]


def test_trace_command_writes_a_valid_trace(tmp_path: Path) -> None:
    rec = record(tmp_path / "rec.gz", faulty())
    out = tmp_path / "trace.json"
    p = run("trace_cli", str(rec), "-o", str(out), "--group-by", "neuroncore")
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr and "10 reports from 1 recording(s)" in p.stderr
    events = tef.check_trace(out)
    assert "i-0123456789abcdef0 NC 3" in tef.process_names(events).values()
    assert not list(tmp_path.glob(".trace.json.*"))  # no temporary left behind


def test_det_prints_one_line_per_problem_and_exits_1(tmp_path: Path) -> None:
    rec = record(tmp_path / "rec.gz", faulty())
    out = tmp_path / "det.json"
    p = run("det_cli", str(rec), "-o", str(out))
    assert p.returncode == 1, p.stderr
    assert p.stdout.splitlines() == [
        "numerical_error NC 3 @ 12:00:01 - 12:00:03: runtime_tag=train pid=100 count=2 periods=2"
    ]
    assert "1 problem(s) detected" in p.stderr
    events = tef.check_trace(out)
    threads = tef.thread_names(events)
    marked = [e for e in events if e["ph"] == "X" and threads[(e["pid"], e["tid"])].startswith("problem: ")]
    assert [(e["name"], e["cname"]) for e in marked] == [("numerical_error", "terrible")]
    assert any(e["ph"] == "i" and e["s"] == "g" for e in events)


def test_det_on_a_clean_capture_exits_0(tmp_path: Path) -> None:
    capture = tmp_path / "out.jsonl"  # plain `neuron-monitor > out.jsonl`
    capture.write_bytes(b"".join(orjson.dumps(report(T0 + i, [Rt(1, "a", [0])])) + b"\n" for i in range(5)))
    p = run("det_cli", str(capture))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and "no errors detected" in p.stderr


def test_a_recording_being_written_can_be_read(tmp_path: Path) -> None:
    rec = tmp_path / "live.gz"
    r = Recorder(rec)
    for rep in faulty(6):
        r.append(orjson.dumps(rep) + b"\n")
    try:
        p = run("det_cli", str(rec))
        assert p.returncode == 1 and "numerical_error NC 3" in p.stdout
        assert "6 reports" in p.stderr
    finally:
        r.close()


def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path) -> None:
    rec = record(tmp_path / "rec.gz", faulty(3))
    cases = [
        ("trace_cli", str(rec), "--filter-neuron-core", "2-1"),
        ("trace_cli", str(rec), "--filter-event-type", "bogus"),
        ("trace_cli", str(tmp_path / "missing.gz")),
        ("det_cli", str(rec), "--hang-periods", "0"),
        ("trace_cli", str(rec), "-o", str(tmp_path / "no" / "such" / "dir" / "t.json")),
    ]
    for module, *args in cases:
        p = run(module, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr


def test_garbage_input_is_counted_not_fatal(tmp_path: Path) -> None:
    f = tmp_path / "mixed.jsonl"
    good = b"".join(orjson.dumps(r) + b"\n" for r in faulty(4))
    f.write_bytes(b"garbage\n" + good + b'{"unrelated": 1}\n' + b"\x00\xff\n")
    p = run("trace_cli", str(f), "-o", str(tmp_path / "t.json"))
    assert p.returncode == 0, p.stderr
    assert "4 reports" in p.stderr and "3 bad lines skipped" in p.stderr
    tef.check_trace(tmp_path / "t.json")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"nothing here\n")
    p = run("trace_cli", str(empty), "-o", str(tmp_path / "e.json"))
    assert p.returncode == 1 and "no reports" in p.stderr


def test_a_run_that_reads_no_report_leaves_an_earlier_trace_as_it_was(tmp_path: Path) -> None:
    """A recording that holds no report (here: a file of broken lines) makes no trace: the run exits non-zero and a
    trace of that name from an earlier run is still there (before: replaced by an empty trace, "wrote ... 0
    events", while the docs promise a failed run leaves no half trace)."""
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not a report\n{\n")
    for module, code in (("trace_cli", 1), ("det_cli", 2)):
        out = tmp_path / f"{module}.json"
        out.write_text("the earlier trace")
        p = run(module, str(junk), "-o", str(out))
        assert p.returncode == code, p.stderr
        assert f"no reports found in the recordings; {out} not written" in p.stderr, p.stderr
        assert "wrote" not in p.stderr
        assert out.read_text() == "the earlier trace"
        assert not list(tmp_path.glob(f".{out.name}.*"))  # no temporary left behind


def test_a_time_range_with_no_report_makes_no_trace(tmp_path: Path) -> None:
    """--start past the recording's end: nothing to show, said so (before: "wrote ... 0 events ... 10 reports",
    exit 0, an empty trace in place of the earlier one)."""
    rec = record(tmp_path / "rec.gz", faulty())
    for module, code in (("trace_cli", 1), ("det_cli", 2)):
        out = tmp_path / f"{module}.json"
        out.write_text("the earlier trace")
        p = run(module, str(rec), "-o", str(out), "--start", "2099-01-01T00:00:00")
        assert p.returncode == code, p.stderr
        assert f"no report between --start and --end (10 read); {out} not written" in p.stderr, p.stderr
        assert out.read_text() == "the earlier trace"


def test_two_nodes_whose_recordings_share_a_name_stay_two(tmp_path: Path) -> None:
    """node1/rec.gz and node2/rec.gz (the docs' own example) from nodes whose reports carry no instance id (IMDS
    off): two instances, named by their paths (before: both were "rec.gz", one instance whose runtime vanished and
    came back every report, and the second node's reports at the same times dropped as out of order)."""
    recs = []
    for node, pid in (("node1", 100), ("node2", 200)):
        (tmp_path / node).mkdir()
        reports = [report(T0 + i, [Rt(pid, "train", [0, 1])], instance="") for i in range(6)]
        recs.append(str(record(tmp_path / node / "rec.gz", reports)))
    p = run("det_cli", *recs)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no errors detected; 12 reports from 2 recording(s)" in p.stderr, p.stderr
    out = tmp_path / "job.json"
    p = run("trace_cli", *recs, "-o", str(out))
    assert p.returncode == 0, p.stderr
    names = sorted(tef.process_names(tef.check_trace(out)).values())
    assert [n.split(" (")[0] for n in names] == recs, names
