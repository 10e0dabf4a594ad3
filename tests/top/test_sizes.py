"""The live layout as text at 80x24, 120x40 and 200x60: every section stays, nothing is wider or taller than the
terminal, and the space a larger terminal has goes to history (sparklines)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import orjson
import pytest

from neuron_monitor.top.app import Viewer
from neuron_monitor.top.history import BLOCKS
from neuron_monitor.top.layout import plain, render

RECORDED = Path(__file__).resolve().parent.parent / "replay" / "recorded" / "sim_trn2_48xlarge_16rt.jsonl.gz"
SIZE_120x40 = ("--width", "120", "--height", "40", "--sort", "memory")
SPARK = re.compile(f"[{BLOCKS}]{{3,}}")


@pytest.fixture(scope="module")
def viewer() -> Viewer:
    v = Viewer("test")
    for line in gzip.decompress(RECORDED.read_bytes()).splitlines():
        if line.strip():
            v.report(orjson.loads(line), track=False)
    assert v.history.points >= 5
    return v


def _text(v: Viewer, view: str, width: int, height: int) -> list[str]:
    v.state.view = view
    lines = render(v.frame(0.0, 0.0), width, height)
    assert len(lines) == height
    out = plain(lines).split("\n")[:-1]
    assert all(len(line) <= width for line in out), max(out, key=len)
    return out


@pytest.mark.parametrize("view", ["d", "c"])
def test_80x24_keeps_devices_runtimes_and_host(viewer: Viewer, view: str) -> None:
    out = _text(viewer, view, 80, 24)
    text = "\n".join(out)
    assert out[1].startswith("host CPU")
    assert re.search(r"^runtimes \(15\)", text, re.M)
    assert re.search(r"^job-00 ", text, re.M)
    assert "more runtimes (press r)" in text
    if view == "d":
        assert re.search(r"^dev ", text, re.M) and re.search(r"^\s+0 \[", text, re.M)
        assert "below" in text  # the devices that do not fit scroll
    else:
        assert re.search(r"^d0 ", text, re.M) and SPARK.search(text)  # per-core history


def test_120x40_shows_each_device_with_a_utilization_sparkline(viewer: Viewer) -> None:
    out = _text(viewer, "d", 120, 40)
    assert "util history" in out[3]
    rows = [line for line in out if re.match(r"\s+\d+ \[", line)]
    assert len(rows) == 16 and all(SPARK.search(line) for line in rows)
    assert any(line.startswith("job-14 ") for line in out)  # every runtime fits


def test_200x60_uses_the_space_for_history(viewer: Viewer) -> None:
    out = _text(viewer, "d", 200, 60)  # braille graphs 3 rows high (2 points per character), the runtimes below
    for name in ("util history", "memory history", "power history"):
        assert name in out[3]
    text = "\n".join(out)
    assert re.search(r"^history \(last \d+ s", text, re.M)
    first = next(n for n, line in enumerate(out) if line.startswith("devices utilization "))
    graph = out[first : first + 3]
    assert all(re.search("[\u2800-\u28ff]{4,}", line) for line in graph)
    assert all(line.startswith(" " * 22) for line in graph[1:])
    assert re.search("[\u2801-\u28ff]", graph[-1]) and graph[-1].endswith("%")
    assert re.search(r"^host CPU +[ \u2800-\u28ff]*[\u2800-\u28ff]", text, re.M)
    assert any(line.startswith("job-14 ") for line in out)
    viewer.state.graph = "blocks"  # g: one row of block sparklines each
    try:
        text = "\n".join(_text(viewer, "d", 200, 60))
    finally:
        viewer.state.graph = "braille"
    assert re.search(r"^devices utilization +\S*[" + BLOCKS + "]", text, re.M)
    assert re.search(r"^host CPU +\S*[" + BLOCKS + "]", text, re.M)
    assert not re.search("[\u2800-\u28ff]", text)


def test_the_device_cursor_shows_the_selected_devices_health_story(viewer: Viewer) -> None:
    for size in ((80, 24), (120, 40), (200, 60)):
        viewer.state.view, viewer.state.selected = "d", None
        for _ in range(13):
            viewer.press("down")  # the first press shows the cursor on device 0
        assert viewer.state.selected == 12
        out = _text(viewer, "d", *size)
        text = "\n".join(out)
        assert re.search(r"^>12 ", text, re.M), text  # the table follows the cursor
        assert re.search(r"^device 12 \(cores 48-51\): utilization \d+\.\d%  memory ", text, re.M)
        assert "  verdict healthy" in text or "  driver health: ok" in text
        assert re.search(r"^job-00 ", text, re.M)  # the runtimes stay below
    for _ in range(40):
        viewer.press("pgdn")
    assert viewer.state.selected == 15  # clamped to the last device
    viewer.press("esc")
    assert viewer.state.selected is None
    assert "(cores" not in "\n".join(_text(viewer, "d", 120, 40))


def test_once_has_no_history(viewer: Viewer) -> None:
    frame = viewer.frame(0.0, 0.0)
    frame.history = None
    assert not SPARK.search(plain(render(frame, 200, None)))


@pytest.mark.parametrize("by", ["util", "memory", "tag", "pid"])
def test_s_sorts_the_runtimes(viewer: Viewer, by: str) -> None:
    viewer.state.sort = by
    try:
        out = _text(viewer, "r", 120, 40)
    finally:
        viewer.state.sort = ""
    assert f"s sort: {by}" in out[2]
    rows = [line.split() for line in out if line.startswith("job-")]
    assert len(rows) == 15
    screen = viewer.screen()
    assert screen is not None
    by_tag = {r.tag: r for r in screen.runtimes}
    runtimes = [by_tag[row[0]] for row in rows]
    if by == "util":
        keys = [-(r.utilization or 0.0) for r in runtimes]
        assert rows[0][3] == f"{runtimes[0].utilization:.0f}%"
    elif by == "memory":
        keys = [-r.memory for r in runtimes]
    elif by == "tag":
        keys = [r.tag for r in runtimes]  # type: ignore[misc]
    else:
        keys = [r.pid for r in runtimes]  # type: ignore[misc]
    assert keys == sorted(keys)  # type: ignore[type-var]
    assert len(set(keys)) > 1


def test_the_models_view_lists_each_runtimes_models(viewer: Viewer) -> None:
    out = _text(viewer, "m", 120, 40)
    text = "\n".join(out)
    assert "m Models" in out[2]
    assert re.search(r"^job-00 +\d+ +…?\S*model_0_0\.neff +10001 +(running|loaded) +\S+ +\S+ +[\d,]+$", text, re.M)
    screen = viewer.screen()
    assert screen is not None
    models = sum(len(r.models or ()) for r in screen.runtimes)
    assert models > len(screen.runtimes)  # some runtimes hold two models
    assert f"models ({models} loaded by 15 runtimes)" in plain(render(viewer.frame(0.0, 0.0), 120, 200))


def test_a_device_not_healthy_is_coloured_and_its_reason_stays_in_view() -> None:
    from neuron_monitor.groups.neuron_device_health.spec import COL_VERDICT
    from neuron_monitor.top.history import History
    from neuron_monitor.top.layout import Frame
    from neuron_monitor.top.model import Device, Screen

    reason = "UNHEALTHY ecc_uncorrected 2 \x1b[2J"
    devices = tuple(
        Device(
            index=i,
            utilization=10.0,
            cores=(i,),
            memory={},
            memory_total=None,
            cells={COL_VERDICT: (reason, "bold red") if i == 7 else ("healthy", "green")},
        )
        for i in range(16)
    )
    screen = Screen(devices=devices, device_count=16, device_columns=(COL_VERDICT,))
    history = History()
    history.add(screen)
    lines = render(Frame(screen=screen, history=history), 80, 12)
    text = plain(lines)
    assert "device 7: UNHEALTHY ecc_uncorrected 2 \u241b[2J" in text  # sanitized, and in view though row 7 is not
    assert "\x1b" not in text
    assert not any(line and line[0][0] == "  7 " for line in lines)
    tall = render(Frame(screen=screen, history=history), 80, 40)
    row7 = next(line for line in tall if line and line[0][0] == "  7 ")
    assert row7[0][1] == "bold red"


def test_once_with_height_lays_out_the_live_screen_with_the_replays_history(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.top.cli", "--replay", str(RECORDED), "--once", *SIZE_120x40],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout.decode()
    lines = out.split("\n")[:-1]
    assert len(lines) == 40 and all(len(line) <= 120 for line in lines)
    assert "util history" in out and "s sort: memory" in out
    assert SPARK.search(out)


def test_a_tiny_terminal_leaves_the_time_out_rather_than_cut_it(viewer: Viewer) -> None:
    """At 20 columns the title has no room for the report's time and age: it leaves them out (they were cut to
    their first character, "neuron-monitor-top 0"); from 40 columns they are there."""
    frame = viewer.frame(0.0, 0.0)
    frame.now = frame.screen.report_time if frame.screen and frame.screen.report_time else 0.0
    title = plain(render(frame, 20, 5)).split("\n")[0]
    assert title.rstrip() == "neuron-monitor-top", title
    title = plain(render(frame, 40, 10)).split("\n")[0]
    assert re.search(r"\d\d:\d\d:\d\d \(0\.0s ago\)$", title), title
