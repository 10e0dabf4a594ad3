"""Strings of the reports cannot reach a trace viewer as controls: every name and argument of a trace is sanitized.

Before: `neuron-monitor-trace` and `neuron-monitor-det -o` wrote a runtime tag (the workload's NEURON_PROCESS_TAG),
an instance id, error strings as read: JSON escaping keeps the file valid, but Perfetto and chrome://tracing show
the decoded text, so ESC/BEL sequences, a newline (a forged second line in a track name) and bidi overrides
(``job\u202eexe.txt`` shown reversed) reached the viewer's track list and slice details. After: `TraceWriter`
sanitizes every string it writes (`neuron_monitor.util.sanitize`: one visible character each, same length).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.util.sanitize import sanitize
from tests.hostile.test_terminal_injection import ATTACKS, FORBIDDEN
from tests.timeline import tef
from tests.timeline.factory import T0, Rt, record, report
from tests.timeline.test_cli import run


def _strings(value: Any) -> list[str]:
    """Every string of a parsed JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _hostile_recording(path: Path) -> Path:
    attack = "".join(ATTACKS.values())
    reports = []
    for i in range(12):
        rt = Rt(4242, f"job{attack}", [0, 1], errors={"numerical": 1} if i in (3, 4) else {})
        r = report(T0 + i, [rt] if i < 10 else [], instance=f"i-0abc{attack}")
        for entry in r["neuron_runtime_data"]:
            for model in entry["report"]["memory_used"]["loaded_models"]:
                model["name"] = f"/cache/model{attack}.neff"
        reports.append(r)
    return record(path, reports)


@pytest.mark.parametrize("group_by", ["instance", "device", "neuroncore", "process"])
def test_trace_names_and_args_are_sanitized(tmp_path: Path, group_by: str) -> None:
    rec = _hostile_recording(tmp_path / "rec.gz")
    out = tmp_path / "trace.json"
    done = run("trace_cli", str(rec), "-o", str(out), "--group-by", group_by)
    assert done.returncode == 0, done.stderr
    doc = tef.load(out)
    tef.check_events(doc["traceEvents"])
    texts = _strings(doc)
    for ch in (*FORBIDDEN, "\n"):
        assert not [t for t in texts if ch in t], repr(ch)
    attack = "".join(ATTACKS.values())
    for name in (f"job{attack}", f"i-0abc{attack}"):
        assert any(sanitize(name) in t for t in texts), name  # there, every character visible


def test_det_trace_names_and_args_are_sanitized(tmp_path: Path) -> None:
    rec = _hostile_recording(tmp_path / "rec.gz")
    out = tmp_path / "problems.json"
    done = run("det_cli", str(rec), "-o", str(out))
    assert done.returncode == 1, done.stderr  # the numerical errors and the runtime that vanished
    for ch in FORBIDDEN:
        assert ch not in done.stdout
    doc = tef.load(out)
    tef.check_events(doc["traceEvents"])
    texts = _strings(doc)
    assert any(t.startswith("problem: ") for t in texts)
    for ch in (*FORBIDDEN, "\n"):
        assert not [t for t in texts if ch in t], repr(ch)
