"""Strings from the workload and the reports cannot write to a terminal, a page or a log.

Before (issue 32): neuron-monitor-top printed runtime tags (the workload's NEURON_PROCESS_TAG), instance names,
error strings raw, interactive and --once: OSC 52 clipboard writes, ESC[2J, cursor moves, OSC 8 links, C1
controls, bidi overrides all reached the terminal. After: `neuron_monitor.util.sanitize` at every place text leaves:
the top view's terminal writer and plain text, its stderr lines, the exporter's landing page (also HTML-escaped),
every command's log formatter, neuron-monitor-det's finding lines.
"""

from __future__ import annotations

import copy
import io
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from neuron_monitor.top.layout import Frame, plain, render
from neuron_monitor.top.model import screen_from_report
from neuron_monitor.top.terminal import to_text
from neuron_monitor.util.sanitize import SafeFormatter, html_text, sanitize
from tests.conftest import REPO

REPORT = REPO / "tests" / "fixtures" / "reports" / "cwagent-test_trn1n32xl_report_line.json"

ATTACKS = {
    "OSC 52 clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "clear screen": "\x1b[2J\x1b[H",
    "cursor move": "\x1b[10;10H\x1b[1A",
    "OSC 8 link": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "C1 CSI": "\x9b2J",
    "C1 OSC": "\x9d52;c;eA==\x9c",
    "bidi override": "job\u202eexe.txt",
    "bidi isolate": "\u2067abc\u2069",
    "newline": "a\nforged: line",
    "carriage return": "job\roverwritten",
    "bell and backspace": "\x07\x08\x08\x08",
    "DEL": "x\x7fy",
    "line separator": "a\u2028b",
}
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\u202e", "\u2067", "\u2069", "\r", "\x08", "\x7f", "\u2028")


def assert_clean(text: str, allow_newlines: bool = False) -> None:
    for ch in FORBIDDEN:
        assert ch not in text, (ch, text[:200])
    if not allow_newlines:
        assert "\n" not in text


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_sanitize_keeps_the_length_and_shows_every_character(name: str) -> None:
    attack = ATTACKS[name]
    safe = sanitize(attack)
    assert len(safe) == len(attack)
    assert_clean(safe)
    assert sum(1 for a, b in zip(attack, safe, strict=True) if a != b) >= 1


def test_plain_text_is_returned_as_is() -> None:
    text = "job-00 ünïcödé 日本 ✓ tab-free"
    assert sanitize(text) is text


def hostile_report(attack: str) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads(REPORT.read_bytes())
    report = copy.deepcopy(report)
    entry = report["neuron_runtime_data"][0]
    entry["neuron_runtime_tag"] = f"tag{attack}"
    entry["error"] = f"error{attack}"
    for obj in entry["report"].values():
        obj["error"] = f"group error{attack}"
    used = entry["report"].get("memory_used", {})
    used["error"] = ""  # usable, so the models view lists its models
    for model in used.get("loaded_models", []):
        model["name"] = f"model{attack}"  # the model name is written by the workload, in its data block
    report["instance_info"]["instance_name"] = f"name{attack}"
    report["instance_info"]["instance_type"] = f"trn1n.32xlarge{attack}"
    report["instance_info"]["error"] = f"imds{attack}"
    report["neuron_hardware_info"]["error"] = f"hw{attack}"
    for obj in report["system_data"].values():
        obj["error"] = f"system{attack}"
    return report


@pytest.mark.parametrize("name", sorted(ATTACKS))
@pytest.mark.parametrize("view", ["d", "c", "r", "m"])
def test_top_frames_carry_no_control_or_bidi_character(name: str, view: str) -> None:
    report = hostile_report(ATTACKS[name])
    frame = Frame(
        screen=screen_from_report(report, None),
        view=view,
        now=0.0,
        messages=(f"skipped a broken line{ATTACKS[name]}",),
        filter_text=f"f{ATTACKS[name]}",
    )
    lines = render(frame, 160, None)
    assert_clean(plain(lines), allow_newlines=True)
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=160).print(to_text(lines))
    painted = out.getvalue()
    for ch in FORBIDDEN[1:]:  # Rich's own colour sequences start with ESC; nothing else may
        assert ch not in painted, (ch, name)
    for seq in ("\x1b]", "\x1b[2J", "\x1b[H", "\x1b[10;10H", "\x1b[1A"):
        assert seq not in painted


def test_top_once_on_a_pipe_prints_no_control_sequence() -> None:
    lines = b"".join(orjson.dumps(hostile_report(a)) + b"\n" for a in ATTACKS.values())
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.top.cli", "--once", "--stdin", "--view", "r"],
        input=b"not json \x1b]52;c;eA==\x07\n" + lines,
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert_clean(proc.stdout.decode(), allow_newlines=True)
    assert_clean(proc.stderr.decode(), allow_newlines=True)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_landing_page_text_is_escaped_and_visible(name: str) -> None:
    page = html_text(f"<script>alert(1)</script>{ATTACKS[name]}\"'&")
    assert "<script>" not in page and '"' not in page and "'" not in page
    assert_clean(page)


def test_the_landing_page_shows_a_hostile_group_name_inert() -> None:
    from neuron_monitor.exporters.prometheus.collector import ExporterCollector
    from neuron_monitor.exporters.prometheus.landing import landing_page
    from neuron_monitor.exporters.prometheus.state import ExporterState

    state = ExporterState()
    state.group_errors_total["<img src=x onerror=alert(1)>\x1b]52;c;eA==\x07\u202e"] = 3
    page = landing_page(ExporterCollector(state), False)
    assert "<img" not in page
    assert_clean(page, allow_newlines=True)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_log_line_that_echoes_input_is_one_clean_line(name: str) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(SafeFormatter("prog: %(levelname)s: %(message)s"))
    logger = logging.getLogger(f"test.sanitize.{name}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.warning("skipped a bad report line: %s", ATTACKS[name])
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert_clean(text[:-1])


def test_a_traceback_keeps_its_lines_but_not_the_inputs_controls() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(SafeFormatter("%(message)s"))
    logger = logging.getLogger("test.sanitize.tb")
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        raise ValueError("bad tag \x1b[2J")
    except ValueError:
        logger.exception("failed")
    text = out.getvalue()
    assert "Traceback" in text and text.count("\n") > 2
    assert "\x1b" not in text


@pytest.mark.parametrize("name", list(ATTACKS))
def test_pod_info_prints_the_kubelets_error_inert(tmp_path: Path, name: str) -> None:
    """``python3 -m neuron_monitor.k8s.pod_info`` (the node check docs/running.md gives) prints the group's error on
    stderr: a kubelet's gRPC status message is the kubelet's text (before: printed raw, its escapes reached the
    terminal)."""
    pytest.importorskip("grpc")
    import grpc

    from tests.k8s.podresources_server import FakeKubelet

    sock = tmp_path / "kubelet.sock"
    kubelet = FakeKubelet(str(sock))
    kubelet.fail_with = grpc.StatusCode.INTERNAL
    kubelet.fail_details = f"no {ATTACKS[name]} here"
    kubelet.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "neuron_monitor.k8s.pod_info", "--pod-resources-socket", str(sock),
             "--k8s-api", "off"],
            capture_output=True,
            cwd=REPO,
            timeout=60,
            check=False,
        )  # fmt: skip
    finally:
        kubelet.stop()
    assert done.returncode == 1, done.stderr[-2000:]
    err = done.stderr.decode()
    assert err.endswith("\n") and err.count("\n") == 1 and "no " in err and "here" in err, err
    assert sanitize(err[:-1]) == err[:-1]  # no control, C1 or bidi character left


@pytest.mark.parametrize("name", ["OSC 52 clipboard", "clear screen", "C1 CSI", "bidi override", "DEL"])
def test_a_configuration_error_line_shows_the_files_string_inert(tmp_path: Path, name: str) -> None:
    """A metric group's name in a configuration file (a ConfigMap someone else writes) is echoed by the error
    line: before, neuron-monitor wrote it to the terminal as it was (an OSC 52 clipboard write among them)."""
    conf = tmp_path / "monitor.conf"
    conf.write_bytes(orjson.dumps({"neuron_runtimes": [{"metrics": [{"type": f"x{ATTACKS[name]}y"}]}]}))
    p = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--once", "--no-imds"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    line = p.stderr.rstrip("\n")
    assert_clean(line)
    assert "unknown metric group" in line and sanitize(f"x{ATTACKS[name]}y") in line


@pytest.mark.parametrize("name", ["OSC 52 clipboard", "clear screen", "bidi override"])
def test_a_usage_error_line_shows_the_argument_inert(name: str) -> None:
    """argparse echoes an unknown argument as given (a unit file's or a pod spec's arguments)."""
    p = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.exporters.otlp.cli", f"--no-such-flag=x{ATTACKS[name]}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert_clean(p.stderr.rstrip("\n"))
    assert "unrecognized arguments: --no-such-flag=x" in p.stderr


@pytest.mark.parametrize("module", ["det_cli", "trace_cli"])
@pytest.mark.parametrize("name", ["OSC 52 clipboard", "clear screen", "bidi override"])
def test_timeline_lines_show_a_file_name_inert(tmp_path: Path, module: str, name: str) -> None:
    """A recording's file name is echoed by neuron-monitor-det/-trace's lines (a glob over a log directory others
    can write to): before, its controls reached the terminal raw."""
    missing = tmp_path / f"rec{ATTACKS[name]}.gz"
    p = subprocess.run(
        [sys.executable, "-m", f"neuron_monitor.timeline.{module}", str(missing), "-o", str(tmp_path / "t.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert_clean(p.stderr.rstrip("\n"))
    assert "no such recording" in p.stderr
