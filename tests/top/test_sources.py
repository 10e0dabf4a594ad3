"""Report sources and the viewer they feed: broken lines, ended input, vanished runtimes, stalls, replay."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor.daemon.config_values import ConfigError
from neuron_monitor.timeline.recording import Recorder
from neuron_monitor.top import app
from neuron_monitor.top.app import Viewer
from neuron_monitor.top.layout import plain, render
from neuron_monitor.top.sources import Replay, StreamSource, parse_line, top_plan

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def wandb_reports() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (REPORTS / "wandb_trn1-2xl_reports.jsonl").read_text().splitlines()]


class ListFeed:
    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.endings: list[str] = []

    def report(self, report: dict[str, Any]) -> None:
        self.reports.append(report)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def ended(self, text: str) -> None:
        self.endings.append(text)


def test_parse_line() -> None:
    report, why = parse_line(orjson.dumps(wandb_reports()[0]))
    assert report is not None and why == ""
    assert parse_line(b'{"neuron_runtime_data": [1')[1].startswith("not JSON")
    assert parse_line(b"[1, 2]")[1] == "report is a JSON list, not an object"
    assert "no neuron-monitor report keys" in parse_line(b'{"a": 1}')[1]


def test_stream_source_counts_broken_lines_and_keeps_going() -> None:
    feed = ListFeed()
    src = StreamSource(io.BytesIO(b""), "stdin")
    good = orjson.dumps(wandb_reports()[0]) + b"\n"
    for line in [good, b"{broken\n", b"\n", b'{"x": 1}\n', good]:
        src.handle(line, feed)
    assert len(feed.reports) == 2
    assert len(feed.problems) == 2 and "(2 so far)" in feed.problems[1]
    assert "skipped a broken line on stdin" in feed.problems[0]


def test_stream_source_first_report_for_once() -> None:
    good = orjson.dumps(wandb_reports()[1]) + b"\n"
    report, problems = StreamSource(io.BytesIO(b"garbage\n" + good + good)).first()
    assert report is not None and report["neuron_runtime_data"][0]["pid"] == 16851
    assert len(problems) == 1 and "broken line" in problems[0]
    report, problems = StreamSource(io.BytesIO(b"garbage\n")).first()
    assert report is None and "ended before a valid report" in problems[-1]


def test_top_plan_defaults_to_one_second() -> None:
    plan = top_plan(None)
    assert plan.smallest_period() == 1.0
    assert {p for _, p in plan.system_groups} == {1.0}
    assert all(p == 1.0 for s in plan.runtime_scopes for _, p in s.groups)
    with pytest.raises(ConfigError):
        top_plan("/nonexistent/monitor.conf")


def test_viewer_shows_vanished_runtimes_ended_input_and_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(app.time, "monotonic", lambda: clock[0])
    first, second, _ = wandb_reports()
    v = Viewer("stdin")
    v.report(first)
    clock[0] += 1.0
    v.report(second)  # pid 1337 vanished, 16851 appeared
    msgs = v.messages(clock[0])
    assert any("runtime 1337 (pid 1337) is gone" in m for m in msgs)
    v.problem("skipped a broken line on stdin (1 so far): not JSON")
    out = plain(render(v.frame(second.get("report_time", 0.0) or 0.0, clock[0]), 100, 30))
    assert "is gone" in out and "skipped a broken line" in out and "16851" in out
    clock[0] += 30.0  # messages expire; a long silence is called out
    msgs = v.messages(clock[0])
    assert not any("is gone" in m for m in msgs)
    assert any("no new report for 30s" in m for m in msgs)
    v.ended("stdin ended: no more reports (did the daemon stop?)")
    msgs = v.messages(clock[0])
    assert msgs[-1].startswith("stdin ended") and not any("no new report" in m for m in msgs)


def test_viewer_filter_key_refilters() -> None:
    v = Viewer("x")
    v.report(wandb_reports()[1])
    screen = v.screen()
    assert screen is not None and len(screen.runtimes) == 1
    for key in ["f", "n", "o", "p", "e", "enter"]:
        assert v.press(key) == ""
    screen = v.screen()
    assert screen is not None and screen.runtimes == () and screen.hidden_runtimes == 1
    assert v.press("q") == "quit"


def _timed(n: int) -> list[dict[str, Any]]:
    out = []
    base = wandb_reports()[1]
    for i in range(n):
        r = copy.deepcopy(base)
        r["report_time"] = 1000.0 + i
        r["neuron_runtime_data"][0]["pid"] = i
        out.append(r)
    return out


def test_replay_plays_at_the_recorded_pace_and_seeks() -> None:
    r = Replay(_timed(200))
    assert len(r) == 200 and r.current()["neuron_runtime_data"][0]["pid"] == 0
    assert r.advance(0.5) is False and r.index == 0
    assert r.advance(0.6) is True and r.index == 1
    r.advance(2.0)
    assert r.index == 3
    assert r.seek(60.0) and r.index == 63
    assert r.seek(-60.0) and r.index == 3
    assert r.step(-1) and r.index == 2 and r.paused
    assert r.advance(10.0) is False and r.index == 2  # paused
    r.toggle()
    r.faster(2.0)
    r.advance(1.0)
    assert r.index == 4 and "x2" in r.position()
    assert r.last() and r.index == 199 and "at the end" in r.position()
    assert r.advance(5.0) is False
    r.toggle()  # pause at the end
    assert r.paused and r.index == 199
    r.toggle()  # play again from the start
    assert r.index == 0 and not r.paused
    assert r.first() is False and r.step(-5) is False  # nothing before the first report
    assert r.current()["neuron_runtime_data"][0]["pid"] == 0


def test_replay_without_report_time_assumes_one_second() -> None:
    r = Replay(wandb_reports())
    assert r.times[1] - r.times[0] == 1.0 and r.times[2] - r.times[1] == 1.0


def test_replay_loads_a_recording_with_a_broken_line(tmp_path: Path) -> None:
    path = tmp_path / "rec.gz"
    with Recorder(path) as rec:
        for i, report in enumerate(_timed(5)):
            rec.append(orjson.dumps(report) + b"\n")
            if i == 2:
                rec.append(b"{not a report\n")
    replay = Replay.load(str(path))
    assert len(replay) == 5
    assert any("broken line" in p for p in replay.problems)
    v = Viewer("replay", replay=replay)
    v.report(replay.current(), track=False)
    v.press("end")
    assert replay.index == 4
    v.press("left")
    assert replay.index == 3 and replay.paused
    out = plain(render(v.frame(0.0, 0.0), 100, 30))
    assert "replay 4/5 paused" in out and "ago" not in out
    empty = tmp_path / "empty.jsonl"
    empty.write_text("nothing here\n")
    with pytest.raises(OSError, match="no reports to replay"):
        Replay.load(str(empty))
