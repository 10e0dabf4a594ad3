"""`neuron-monitor-top --once` on every simulator shape, and on report lines piped in: plain text, no escapes."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.sim.shapes import SHAPES

pytestmark = pytest.mark.e2e
REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def top_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "neuron_monitor.top.cli", *args]


def _once_outputs(names: list[str], at_once: int = 3) -> dict[str, tuple[int, bytes, bytes]]:
    """``--once`` on each simulator shape, ``at_once`` at a time: all at once, a starved CI core could not start
    each shape's simulator within top's own start-up deadline."""
    out: dict[str, tuple[int, bytes, bytes]] = {}
    for start in range(0, len(names), at_once):
        procs = {
            name: subprocess.Popen(
                top_cmd("--simulate", name, "--no-imds", "--once", "--sim-runtimes", "2"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for name in names[start : start + at_once]
        }
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            out[name] = (proc.returncode, stdout, stderr)
    return out


def test_once_on_every_simulator_shape() -> None:
    for name, (returncode, out_b, err) in _once_outputs(list(SHAPES)).items():
        assert returncode == 0, (name, err.decode())
        out = out_b.decode()
        assert "\x1b" not in out, name  # stdout is a pipe: no escape codes
        shape = SHAPES[name]
        assert name in out.splitlines()[0]
        assert f"{shape.devices}x" in out.splitlines()[0]
        assert f"{shape.devices * shape.logical_cores} NC" in out.splitlines()[0]
        dev_rows = [line for line in out.splitlines() if re.match(r"\s+\d+ \[", line)]
        assert len(dev_rows) == shape.devices, name
        assert "NeuronCore utilization" in out
        assert re.search(r"^runtimes \(2\)", out, re.M), name
        assert len(re.findall(r"^job-0[01] ", out, re.M)) == 2, name
        assert all(len(line) <= 120 for line in out.splitlines())


def test_once_reads_the_first_report_of_piped_lines() -> None:
    lines = (REPORTS / "wandb_trn1-2xl_reports.jsonl").read_bytes()
    proc = subprocess.run(
        top_cmd("--once", "--width", "90"), input=b"not json\n" + lines, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "trn1.2xlarge" in out and re.search(r"^1337 ", out, re.M)  # the first report's runtime
    assert "skipped a broken line on stdin" in out
    assert max(len(line) for line in out.splitlines()) <= 90


def test_once_with_nothing_to_show_exits_1_and_bad_arguments_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(top_cmd("--once", "--stdin"), input=b"garbage\n", capture_output=True, timeout=120)
    assert proc.returncode == 1 and b"no report to show" in proc.stderr
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"perod": "1s"}))
    proc = subprocess.run(top_cmd("--once", "-c", str(conf)), capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"perod" in proc.stderr and b"Traceback" not in proc.stderr
    proc = subprocess.run(top_cmd("--once", "--replay", str(tmp_path / "missing.gz")), capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"missing.gz" in proc.stderr and b"Traceback" not in proc.stderr
    proc = subprocess.run(top_cmd("--filter", "("), capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"--filter" in proc.stderr
    proc = subprocess.run(top_cmd("--simulate", "trn1.2xlarge"), capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"not a terminal" in proc.stderr
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(top_cmd("--stdin", "--once"), stdin=secondary, capture_output=True, timeout=120)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 2 and b"stdin is a terminal" in proc.stderr


def test_a_report_without_the_device_type_counts_devices_in_words() -> None:
    """AWS's older reports do not name the device type: the title says "1 device" (it said "1x devices"), and the
    models view of one runtime says "1 runtime"."""
    done = subprocess.run(
        top_cmd(
            "--replay",
            str(REPORTS / "wandb_trn1-2xl_reports.jsonl"),
            "--once",
            "--width",
            "100",
            "--height",
            "30",
            "--view",
            "m",
        ),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "trn1.2xlarge  1 device 2 NC" in text.splitlines()[0], text
    assert "loaded by 1 runtime)" in text, text


@pytest.mark.parametrize("height", [None, "24"])
def test_a_replay_snapshot_shows_its_place_not_an_age(height: str | None) -> None:
    """A recorded report was not received now: the snapshot of a replay shows "replay 3/3 at the end" where the
    live screen shows the age (before, with --height it said "received <now> (0.0s ago)", and without it the age
    of the recording against the clock)."""
    size = ["--width", "100"] + (["--height", height] if height else [])
    done = subprocess.run(
        top_cmd("--replay", str(REPORTS / "wandb_trn1-2xl_reports.jsonl"), "--once", *size),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    title = done.stdout.decode().splitlines()[0]
    assert title.endswith("replay 3/3 at the end"), title
    assert "received" not in title and "ago" not in title, title


def test_a_host_without_devices_says_so_in_the_devices_view(tmp_path: Path) -> None:
    """A root with no Neuron device (no driver): the devices view says there is none rather than an empty table
    under a header, and the errors say why."""
    done = subprocess.run(
        top_cmd("--root", str(tmp_path), "--no-imds", "--once", "--width", "100", "--height", "24"),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "no Neuron devices in this report" in text, text
    assert "dev utilization" not in text and "no Neuron devices found (is the Neuron driver loaded?)" in text, text


def test_a_bar_of_a_value_not_read_is_not_empty(tmp_path: Path) -> None:
    """A root whose /proc has no stat and no meminfo: the host bars show "?" (before: empty bars, read as 0 %,
    beside the "-" that says the value is unknown)."""
    done = subprocess.run(
        top_cmd("--root", str(tmp_path), "--no-imds", "--once", "--width", "100"),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    host = done.stdout.decode().splitlines()[1]
    assert re.fullmatch(r"host CPU \[ +\? +\] +- +mem \[ +\? +\] -/-", host.rstrip()), host
