"""End to end in a real terminal: tmux runs neuron-monitor-top; we read the screen a person sees and press keys.

Every check waits for a condition with a deadline (the machine may be loaded); nothing sleeps and then asserts.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from neuron_monitor.sim.temporary import TemporarySimulator
from neuron_monitor.timeline.recording import Recorder
from neuron_monitor.top.layout import HELP, MEMORY_LEGEND
from tests.conftest import daemon_cmd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test-tools installs it)"),
]
DEADLINE = 60.0
REPO = Path(__file__).resolve().parent.parent.parent
REPORTS = REPO / "tests" / "fixtures" / "reports"


class Tmux:
    """One tmux server (its own socket) with one session of a fixed size running a shell command."""

    def __init__(self, tmp: Path, width: int, height: int) -> None:
        self.socket = str(tmp / "tmux.sock")
        self.width, self.height = width, height

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], capture_output=True, timeout=30)
        return out.stdout.decode(errors="replace")

    def start(self, command: str) -> None:
        # after the program exits the shell reports its status and the terminal's modes, then waits to be read
        script = f"trap : INT; {command}; echo EXIT=$?; stty -a; echo STTY-DONE; sleep 600"
        env = f"cd {shlex.quote(str(REPO))} && PYTHONPATH={shlex.quote(str(REPO))} exec sh -c {shlex.quote(script)}"
        self.tmux("new-session", "-d", "-x", str(self.width), "-y", str(self.height), env)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def flag(self, name: str) -> str:
        return self.tmux("display-message", "-p", f"#{{{name}}}").strip()

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def wait(self, what: str, cond: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + DEADLINE
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if cond(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{screen}")

    def wait_for(self, *texts: str) -> str:
        return self.wait(" and ".join(map(repr, texts)), lambda s: all(t in s for t in texts))

    def program_pid(self) -> int:
        shell = int(self.flag("pane_pid"))
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
            if children:
                return int(children[0])
            time.sleep(0.1)
        raise AssertionError("the program did not start")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Callable[[int, int], Tmux]]:
    made: list[Tmux] = []

    def make(width: int, height: int) -> Tmux:
        t = Tmux(tmp_path, width, height)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def top(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "neuron_monitor.top.cli", *args])


def assert_restored(t: Tmux, code: int = 0) -> None:
    screen = t.wait_for(f"EXIT={code}", "STTY-DONE")  # stty's whole output is on screen
    assert " icanon" in screen and " echo " in screen  # the keyboard is back in line mode with echo
    assert "neuron-monitor-top" not in screen  # the alternate screen was left: the shell's screen is back
    assert t.flag("alternate_on") == "0"
    assert t.flag("cursor_flag") == "1"  # the cursor is visible again


def test_trn2_at_80x24_views_keys_and_quit(term: Callable[[int, int], Tmux]) -> None:
    t = term(80, 24)
    t.start(top("--simulate", "trn2.48xlarge", "--no-imds", "--sim-runtimes", "4"))
    # every section stays at 80x24: host, devices (scrolling), runtimes below them
    screen = t.wait_for("trn2.48xlarge", "64 NC", "  0 ", "ago)", "host CPU", "runtimes (4)", "job-00")
    lines = screen.splitlines()
    assert lines[2].lstrip().startswith("d Devices")
    t.wait("a busy device", lambda s: re.search(r"^\s+\d+ .*\b(?!0\.0)\d+\.\d%", s, re.M) is not None)
    t.keys("c")
    t.wait_for("NeuronCore utilization", "d0 ", "below")
    t.keys("PgDn")
    t.wait_for("d15", " 63 [")
    t.keys("PgUp")
    t.wait_for("-- 0 above")
    for key, above in (("Down", 1), ("j", 2), ("k", 1), ("Up", 0)):
        t.keys(key)
        t.wait_for(f"-- {above} above")
    t.keys("r")
    screen = t.wait_for("exec/s", "job-00", "job-03")
    t.keys("f")
    t.wait_for("filter (regex, Enter/Esc)")
    t.keys("job-0[12]", "Enter")
    screen = t.wait("the filter applied", lambda s: "/job-0[12]/" in s and "job-01" in s and "job-00" not in s)
    assert "2 hidden" in screen and "job-03" not in screen
    t.keys("?")
    t.wait_for("keys", "filter runtimes by tag")
    t.keys("x")
    t.wait("help closed", lambda s: "filter runtimes by tag" not in s and "job-01" in s)
    t.keys("d")
    t.wait_for("util", "memory", "runtimes (")
    t.keys("q")
    assert_restored(t)


def test_trn2_at_200x60_shows_devices_and_runtimes_and_ends_on_sigterm(term: Callable[[int, int], Tmux]) -> None:
    t = term(200, 60)
    t.start(top("--simulate", "trn2.48xlarge", "--no-imds", "--sim-runtimes", "16"))
    screen = t.wait_for("trn2.48xlarge", " 15 [", "runtimes (16)", "job-15", "util history", "power history")
    graph = re.compile(r"^devices utilization +[ \u2800-\u28ff]+\n {22}.*[\u2801-\u28ff]", re.M)  # braille, rows high
    t.wait("the history section", lambda s: graph.search(s) is not None)
    assert max(len(line) for line in screen.splitlines()) <= 200
    t.keys("c")
    t.wait_for("each physical core", "d15", " 63 [")
    os.kill(t.program_pid(), signal.SIGTERM)
    assert_restored(t)


def test_ctrl_c_restores_the_terminal(term: Callable[[int, int], Tmux]) -> None:
    t = term(100, 30)
    t.start(top("--simulate", "trn1.2xlarge", "--no-imds"))
    t.wait_for("trn1.2xlarge", "  0 [")
    t.keys("C-c")
    assert_restored(t)


def test_a_runtime_that_vanishes_is_named_on_screen(term: Callable[[int, int], Tmux]) -> None:
    with TemporarySimulator("trn1.32xlarge", runtimes=2, seed=3) as sim:
        t = term(120, 40)
        t.start(top("--root", str(sim.root), "--no-imds", "--view", "r"))
        t.wait_for("job-00", "job-01")
        sim.command("stop_runtime", tag="job-01", timeout=DEADLINE)
        t.wait_for("runtime job-01 (pid", "is gone")
        t.keys("q")
        assert_restored(t)


def _wandb_lines() -> list[bytes]:
    return (REPORTS / "wandb_trn1-2xl_reports.jsonl").read_bytes().splitlines(keepends=True)


def test_piped_report_lines_broken_line_and_stopped_daemon(term: Callable[[int, int], Tmux], tmp_path: Path) -> None:
    first, second, third = _wandb_lines()
    part1 = tmp_path / "part1.jsonl"
    part1.write_bytes(first + second + b'{"neuron_runtime_data": [tru\n')
    part2 = tmp_path / "part2.jsonl"
    part2.write_bytes(third)
    go = tmp_path / "go"
    # the "daemon": two reports and a broken line, then (once the test says so) a last report, then it stops
    producer = f"cat {part1}; while [ ! -e {go} ]; do sleep 0.1; done; cat {part2}"
    t = term(100, 30)
    t.start(f"{{ {producer}; }} | {top()}")
    t.wait_for("16851", "runtime 1337 (pid 1337) is gone", "skipped a broken line on stdin")
    go.touch()
    t.wait_for("stdin ended after 3 report(s), 1 broken line(s) skipped")
    t.keys("q")
    assert_restored(t)


def test_the_help_is_read_whole_at_80x24(term: Callable[[int, int], Tmux]) -> None:
    """Every key's description is on screen whole at 80x24, a long one wrapped onto the next line (before, each
    help line was cropped at the width: "report o", "(its health details b", "or block spark")."""
    t = term(80, 24)
    t.start(top("--replay", str(REPORTS / "wandb_trn1-2xl_reports.jsonl")))
    t.wait_for("replay")
    t.keys("?")
    screen = t.wait_for("keys", "quit")
    words = " ".join(screen.split())
    for keys, what in HELP:
        assert f"{keys} {what}" in words or what in words, (keys, what, screen)
    assert MEMORY_LEGEND in words
    assert all(len(line) <= 80 for line in screen.splitlines())
    t.keys("q")  # the first key closes the help, the second quits
    t.wait("help closed", lambda s: "this help" not in s)
    t.keys("q")
    assert_restored(t)


GREEN = re.compile(r"\x1b\[(?:[0-9;]*;)?32(?:;[0-9;]*)?m")
PRODUCER = """
import json, os, select, sys, time
report = json.loads(open(sys.argv[1]).read().strip())
while not os.path.exists(sys.argv[2]):  # a daemon that reports every 0.5 s, until the test stops it
    report["report_time"] = time.time()
    sys.stdout.write(json.dumps(report) + "\\n")
    sys.stdout.flush()
    time.sleep(0.5)
gone = select.poll()
gone.register(sys.stdout.fileno(), 0)  # then it hangs, its pipe open, until the reader has gone (POLLERR)
gone.poll(600_000)
"""


def test_a_stale_report_shows_nothing_healthy(term: Callable[[int, int], Tmux], tmp_path: Path) -> None:
    """While the reports come, the healthy device is green; once they stop (the age red, "no new report"), no
    green is left: the verdict is what the last report said, not what is known now (before: "healthy" stayed
    green however long the daemon had been stalled)."""
    once = subprocess.run(
        daemon_cmd("--simulate", "trn1.2xlarge", "--once", "--no-imds"),
        capture_output=True,
        timeout=300,
        cwd=REPO,
    )
    assert once.returncode == 0, once.stderr
    report = tmp_path / "report.json"
    report.write_bytes(once.stdout)
    (tmp_path / "producer.py").write_text(PRODUCER)
    stop = tmp_path / "stop"
    t = term(120, 30)
    t.start(f"{shlex.quote(sys.executable)} {tmp_path / 'producer.py'} {report} {stop} | {top()}")
    coloured = lambda: t.tmux("capture-pane", "-p", "-e")  # noqa: E731
    t.wait("a healthy device in green", lambda _: "healthy" in (c := coloured()) and GREEN.search(c) is not None)
    stop.touch()
    t.wait_for("no new report for", "healthy")
    screen = coloured()
    assert "healthy" in screen and GREEN.search(screen) is None, screen
    t.keys("q")
    assert_restored(t)


def test_replay_with_pause_and_seek(term: Callable[[int, int], Tmux], tmp_path: Path) -> None:
    base = json.loads(_wandb_lines()[1])
    rec = tmp_path / "rec.gz"
    with Recorder(rec) as r:
        for i in range(10):
            report = copy.deepcopy(base)
            report["report_time"] = 1_800_000_000.0 + i
            report["neuron_runtime_data"][0]["pid"] = 100 + i
            r.append(orjson.dumps(report) + b"\n")
    t = term(100, 30)
    t.start(top("--replay", str(rec), "--view", "r"))
    t.wait_for("replay", "/10")
    t.keys("End")
    t.wait_for("replay 10/10", "109 ")
    t.keys("Left")
    t.wait_for("replay 9/10 paused", "108 ")
    t.keys("Home")
    t.wait_for("replay 1/10 paused", "100 ")
    t.keys("Right")
    t.wait_for("replay 2/10 paused", "101 ")
    t.keys("]")  # 60 s of recorded time forward: past the end, so the last report
    t.wait_for("replay 10/10", "109 ")
    t.keys("[")
    t.wait_for("replay 1/10", "100 ")
    t.keys("+")
    t.wait_for("replay 1/10 paused x2")
    t.keys("+")
    t.wait_for("replay 1/10 paused x4")
    t.keys("-")
    t.wait_for("replay 1/10 paused x2")
    t.keys("Space")
    t.wait("playback to move on", lambda s: "playing" in s and "replay 1/10" not in s)
    t.keys("q")
    assert_restored(t)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for job control")
def test_ctrl_z_gives_the_terminal_back_and_fg_resumes(term: Callable[[int, int], Tmux]) -> None:
    t = term(100, 30)
    repo = shlex.quote(str(REPO))
    shell = f"cd {repo} && PYTHONPATH={repo} PS1='PROMPT> ' exec bash --norc --noprofile -i"
    t.tmux("new-session", "-d", "-x", "100", "-y", "30", shell)
    t.keys(top("--simulate", "trn1.2xlarge", "--no-imds"), "Enter")
    t.wait_for("trn1.2xlarge", "  0 [")
    t.keys("C-z")
    t.wait_for("Stopped")
    t.keys("stty -a | grep -c -- ' icanon .* echo '; echo MODES-CHECKED", "Enter")
    t.wait("the shell's terminal modes", lambda s: "\n1\nMODES-CHECKED" in s)
    assert t.flag("alternate_on") == "0" and t.flag("cursor_flag") == "1"
    t.keys("clear; fg", "Enter")
    t.wait("the view to come back", lambda s: s.startswith("neuron-monitor-top") and "  0 [" in s)
    t.keys("q")
    # keys typed before the program exits would be its keys: wait for the shell's prompt first
    t.wait("the shell's prompt", lambda s: s.rstrip().endswith("PROMPT>") and "neuron-monitor-top  trn1" not in s)
    t.keys("echo EXIT=$?", "Enter")
    t.wait_for("EXIT=0")
    assert t.flag("alternate_on") == "0" and t.flag("cursor_flag") == "1"


def test_frames_are_redrawn_in_place_without_clearing_the_screen() -> None:
    """What the terminal receives: the alternate screen once, then frames that rewrite rows in place, each row
    after a cursor move to its start (no clear-screen, the cause of flicker; only the rows that changed after the
    first frame), then the main screen and the cursor back after SIGTERM."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    cmd = [sys.executable, "-m", "neuron_monitor.top.cli", "--simulate", "trn1.2xlarge", "--no-imds"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(cmd, stdin=secondary, stdout=secondary, stderr=secondary, env=env, start_new_session=True)
    os.close(secondary)
    out = b""

    def read(timeout: float) -> None:
        nonlocal out
        poller = select.poll()  # not select(): the descriptor may be past 1023 in a long test session
        poller.register(primary, select.POLLIN)
        if poller.poll(timeout * 1000):
            with contextlib.suppress(OSError):
                out += os.read(primary, 65536)

    try:
        deadline = time.monotonic() + DEADLINE
        while out.count(b"\x1b[1;1H") < 4 or b"trn1.2xlarge" not in out:  # a few frames (the title's age ticks)
            assert time.monotonic() < deadline, out[-2000:]
            read(0.2)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + DEADLINE
        while proc.poll() is None:
            assert time.monotonic() < deadline
            read(0.05)
        read(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(primary)
    assert proc.returncode == 0
    assert out.count(b"\x1b[?1049h") == 1 and out.count(b"\x1b[?1049l") == 1  # alternate screen in, then out
    assert b"\x1b[2J" not in out and b"\x1b[2K" not in out  # frames overwrite, never clear
    frames = out.split(b"\x1b[1;1H")[1:]
    rows = [len(re.findall(rb"\x1b\[(\d+);1H", f)) + 1 for f in frames]
    assert rows[0] == 24 and min(rows[1:]) < 24  # the first frame is whole, later ones send changed rows only
    assert out.rfind(b"\x1b[?25h") > out.rfind(b"\x1b[?25l") >= 0  # the cursor was hidden, and is shown again


def test_history_sort_models_and_a_resize_storm(term: Callable[[int, int], Tmux]) -> None:
    """The live demo's varying load draws history; s cycles the sort, m shows the models; the view survives a
    storm of resizes between 80x24 and 200x60 and fits each size it ends in."""
    t = term(200, 60)
    t.start(top("--simulate", "trn2.48xlarge", "--no-imds", "--sim-runtimes", "4"))
    t.wait_for("util history", "history (last", "runtimes (4)")
    t.wait("sparklines with motion", lambda s: re.search("[▁-█]{3,}", s) is not None)
    for expected in ("util", "memory", "tag", "pid"):
        t.keys("s")
        t.wait_for(f"s sort: {expected}")
    t.keys("s")
    t.wait("the report's order", lambda s: "s sort:" not in s)
    t.keys("m")
    t.wait_for("m Models", "model", ".neff", "job-00")
    t.keys("d")
    for i in range(20):
        w, h = (80, 24) if i % 2 else (200, 60)
        t.tmux("resize-window", "-t", "0", "-x", str(w), "-y", str(h))
    t.tmux("resize-window", "-t", "0", "-x", "80", "-y", "24")
    # every section of the 80x24 layout at once (a frame drawn during the storm may land after it and be seen
    # half repainted: the wait ends at the first whole 80x24 frame)
    t.wait(
        "the whole 80x24 layout",
        lambda s: (
            all(x in s for x in ("host CPU", "d Devices", "runtimes (4)"))
            and "util history" not in s
            and all(len(x) <= 80 for x in s.splitlines())
        ),
    )
    t.keys("q")
    assert_restored(t)


def _pane_tty(t: Tmux) -> str:
    return t.flag("pane_tty")


def test_every_other_key_of_the_live_view_has_its_effect(term: Callable[[int, int], Tmux]) -> None:
    """The keys the help lists that the other tests do not press: the device cursor (Down, j, PgDn, k, Up, PgUp,
    Esc) with the selected device's health story, g (braille or block graphs), Ctrl-L (a screen spoiled from
    outside is drawn whole again), the filter prompt's Backspace, Esc and empty Enter, and the help listing them;
    on the simulated trn2.48xlarge the efa column is there (the demo host links its devices to their PCI
    functions)."""
    t = term(200, 60)
    t.start(top("--simulate", "trn2.48xlarge", "--no-imds", "--sim-runtimes", "4"))
    t.wait_for("util history", "history (last", "runtimes (4)", "g: blocks")
    efa = re.compile(r"^dev .* efa\n\s+0 .*\d[KMGT]?B/s\n", re.M)  # the header, then device 0's throughput
    t.wait("the efa column", lambda s: efa.search(s) is not None)
    braille_row = re.compile(r"^devices utilization +[ \u2800-\u28ff]*[\u2800-\u28ff]", re.M)
    t.wait("braille history graphs", lambda s: braille_row.search(s) is not None)
    t.keys("g")
    t.wait("block sparklines", lambda s: re.search(r"^devices utilization +\S*[▁-█]", s, re.M) is not None)
    assert "g: braille" in t.screen()
    t.keys("g")
    t.wait("braille again", lambda s: braille_row.search(s) is not None and "g: blocks" in s)
    # the device cursor: the first move shows it on device 0, with the device's health story below the table
    for key, device in (("Down", 0), ("j", 1), ("PgDn", 11), ("k", 10), ("Up", 9), ("PgUp", 0)):
        t.keys(key)
        t.wait_for(f"device {device} (cores {4 * device}-{4 * device + 3}):", "verdict healthy")
        assert re.search(rf"^> *{device} ", t.screen(), re.M)
    t.keys("Escape")
    t.wait("the cursor hidden", lambda s: "(cores" not in s and not re.search(r"^>", s, re.M))
    # Ctrl-L: rows spoiled behind the view's back (a blank row the diff would never send again) are drawn anew
    with open(_pane_tty(t), "w") as tty:
        tty.write("\x1b[60;1HSPOILED-ROW")
    t.wait_for("SPOILED-ROW")
    t.keys("C-l")
    t.wait("the whole screen drawn again", lambda s: "SPOILED-ROW" not in s and "util history" in s)
    # the filter prompt: Backspace edits, Esc cancels (the filter stays), an empty Enter clears
    t.keys("f")
    t.wait_for("filter (regex, Enter/Esc)")
    t.keys("job-0[12]x", "BSpace", "Enter")
    t.wait_for("/job-0[12]/ (2 hidden)")
    t.keys("f", "zz", "Escape")
    t.wait("the filter kept", lambda s: "/job-0[12]/ (2 hidden)" in s and "filter (regex" not in s)
    t.keys("f")
    t.wait_for("filter (regex, Enter/Esc): job-0[12]_")
    t.keys(*(["BSpace"] * 9), "Enter")
    t.wait("the filter cleared", lambda s: "hidden" not in s and "runtimes (4)" in s)
    t.keys("?")
    t.wait_for("keys", "Ctrl-L", "Esc", "history graphs: braille", "device cursor")
    t.keys("g")  # any key closes the help (and does nothing else)
    t.wait("help closed", lambda s: "device cursor" not in s and "g: blocks" in s)
    t.keys("q")
    assert_restored(t)
