"""Catastrophic and nested tag_filter patterns: matching is linear (RE2), refused patterns are one line.

Before (issue 20): ``(a+)+$`` against a 53-character tag wedged the daemon (0 reports, 85 % CPU, SIGTERM ignored);
500+ nested groups were a RecursionError traceback (about 3,000 lines), exit 1. After: the daemon keeps reporting
and stops on SIGTERM; what RE2 cannot take is exit 2 with one line. Deadlines are generous; no timing is asserted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neuron_monitor.daemon.tagmatch import compile_tag_filter
from neuron_monitor.sim.temporary import TemporarySimulator

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
EVIL_TAG = "a" * 53 + "!"


def test_nested_quantifier_against_a_long_tag_returns_in_a_child_process() -> None:
    """Run in a child with a deadline: a backtracking engine would never return (2^53 paths)."""
    code = (
        "from neuron_monitor.daemon.tagmatch import compile_tag_filter as c\n"
        f"print(c('(a+)+$').search({EVIL_TAG!r}) is None, c('(x+x+)+y').search('x' * 5000) is None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE, cwd=REPO)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_search_semantics_match_go() -> None:
    assert compile_tag_filter("^train").search("training-1")
    assert compile_tag_filter("serve|train").search("my-serve")
    assert not compile_tag_filter("^train").search("pretrain")


def _conf(tmp_path: Path, tag_filter: str) -> Path:
    conf = tmp_path / "monitor.conf"
    conf.write_text(
        json.dumps(
            {
                "period": "500ms",
                "neuron_runtimes": [{"tag_filter": tag_filter, "metrics": [{"type": "execution_stats"}]}],
                "system_metrics": [{"type": "memory_info"}],
            }
        )
    )
    return conf


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [(r"(a)\1", "RE2"), ("(?=a)", "RE2"), ("x" * 5000, "longer than"), ("((a{100}){100}){100}", "RE2")],
)
def test_patterns_re2_refuses_exit_2_one_line(tmp_path: Path, pattern: str, needle: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "neuron_monitor.daemon.cli",
        "--no-imds",
        "--once",
        "-c",
        str(_conf(tmp_path, pattern)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE, cwd=REPO, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and len(lines[0]) <= 500, done.stderr[-2000:]


@pytest.mark.parametrize("depth", [500, 5000])
def test_deeply_nested_groups_never_a_traceback(tmp_path: Path, depth: int) -> None:
    pattern = "(" * depth + "a" + ")" * depth
    cmd = [
        sys.executable,
        "-m",
        "neuron_monitor.daemon.cli",
        "--no-imds",
        "--once",
        "-c",
        str(_conf(tmp_path, pattern)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE, cwd=REPO, check=False)
    assert "Traceback" not in done.stderr
    assert done.returncode in (0, 2), done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) <= 1


def test_catastrophic_filter_against_a_hostile_tag_keeps_reports_and_signals(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "(a+)+$")
    with TemporarySimulator("trn1.2xlarge", runtimes=1, tags=[EVIL_TAG]) as sim:
        cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--no-imds", "-c", str(conf), "--root", str(sim.root)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        reports: list[dict[str, object]] = []

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip():
                    reports.append(json.loads(line))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + DEADLINE
            while len(reports) < 4 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert len(reports) >= 4, proc.stderr.read().decode() if proc.poll() is not None else "no reports"
            tags = [e["neuron_runtime_tag"] for r in reports for e in r["neuron_runtime_data"]]  # type: ignore[attr-defined]
            assert tags == []  # the tag ends in "!": the filter does not match it
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=DEADLINE) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


REPORT_LINE = REPO / "tests" / "fixtures" / "reports" / "cwagent-test_trn1n32xl_report_line.json"


def test_top_filters_a_hostile_tag_in_linear_time() -> None:
    """``neuron-monitor-top --filter '(a+)+$'`` on a report whose runtime tag is 40 "a" and "!": RE2, as the
    daemon. Before, top's filter was Python's ``re``: the run was still going when killed at 30 s (in C, holding the
    GIL: no signal handler or watchdog could end it)."""
    report = json.loads(REPORT_LINE.read_text())
    for entry in report["neuron_runtime_data"]:
        entry["neuron_runtime_tag"] = "a" * 40 + "!"
    p = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.top.cli", "--stdin", "--once", "--filter", "(a+)+$"],
        input=json.dumps(report) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    assert f"runtimes (0, {len(report['neuron_runtime_data'])} hidden by the filter)" in p.stdout


@pytest.mark.parametrize("pattern", ["(?=a)", "(a)\\1"])
def test_top_refuses_what_re2_cannot_run_with_one_line(pattern: str) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.top.cli", "--stdin", "--once", "--filter", pattern],
        input=REPORT_LINE.read_text(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert p.returncode == 2
    assert p.stderr.startswith("neuron-monitor-top: --filter: invalid regular expression") and p.stderr.count("\n") == 1
