"""`neuron-monitor --check` never says every source is there while a health verdict is blind, and a counter file that
is there but cannot be read is named as such, never as "not exposed by the driver".

A FIFO at the known place of a signal the device must expose stands for a file that cannot be read (as root a mode
0 file is still readable; a FIFO is refused by every reader whoever runs it). Before: the health group forgot the
device's nodes after the failed read, so its ``sources`` listed none, the group itself was "collected", and
`--check` ended "every source the configured groups need is there (exit 0)" while `neuron-monitor-health` said
unknown (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from tests.conftest import daemon_cmd
from tests.neuron.layouts import DEVICES, build

TIMEOUT = 300


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _check(root: Path, tmp_path: Path, group: str) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "1s", "system_metrics": [{"type": group}]}))
    args = ("--root", str(root), "-c", str(conf), "--exact-groups", "--check", "--json", "--no-imds")
    return subprocess.run(daemon_cmd(*args), capture_output=True, text=True, timeout=TIMEOUT)


def test_an_unreadable_health_signal_fails_the_check(tmp_path: Path) -> None:
    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")
    _fifo(root / DEVICES / "neuron0" / "stats" / "hardware" / "mem_ecc_uncorrected")
    out = _check(root, tmp_path, "neuron_device_health")
    assert out.returncode == 1, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    line = next(s for s in doc["sources"] if s["source"] == "health of device 0")
    assert line["status"] == "unreadable" and line["needed"]
    assert line["group"] == "neuron_device_health"
    assert "signal_unreadable mem_ecc_uncorrected" in line["detail"]


def test_an_unreadable_required_counter_fails_the_check_without_the_health_group(tmp_path: Path) -> None:
    """The counter group alone: its own error is partial (it reports the counters it read), but a required file
    it found and cannot read is a failing line (before: "partial", exit 0)."""
    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")
    _fifo(root / DEVICES / "neuron0" / "stats" / "hardware" / "mem_ecc_uncorrected")
    out = _check(root, tmp_path, "neuron_hw_counters")
    assert out.returncode == 1, out.stdout + out.stderr
    by_source = {s["source"]: s for s in json.loads(out.stdout)["sources"]}
    line = by_source["neuron_hw_counters: hardware/mem_ecc_uncorrected"]
    assert line["status"] == "unreadable" and line["needed"] and "not a regular file" in line["detail"]


def test_unknown_for_what_the_device_says_is_shown_not_failing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")  # every file readable; the power roll-up says NO_DATA (a fresh boot)
    out = _check(root, tmp_path, "neuron_device_health")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [s for s in json.loads(out.stdout)["sources"] if s["source"].startswith("health of")]
    assert [(s["source"], s["status"], s["needed"]) for s in lines] == [("health of device 0", "unknown", False)]
    assert "power_status NO_DATA" in lines[0]["detail"]


def test_an_unreadable_counter_is_named_not_called_unexposed(tmp_path: Path) -> None:
    build(tmp_path, "trn1.2xlarge", "2.30.2.0")
    _fifo(tmp_path / DEVICES / "neuron0" / "stats" / "hardware" / "mem_ecc_corrected")
    group = NeuronHwCounters(RootFS(tmp_path))
    group.prime()
    body = group.collect()
    entry = body["neuron_devices"][0]
    assert "mem_ecc_corrected" not in entry  # not read: left out, never 0
    assert "mem_ecc_corrected of neuron_device 0: not a regular file" in body["error"]
    assert "not exposed" not in body["error"]


def test_devices_that_cannot_be_opened_are_no_idle_host(tmp_path: Path) -> None:
    """The driver lists a device whose /dev node cannot be opened (not mounted in a container, not a Neuron
    device): the report's runtimes are empty, and ``neuron_monitor.error`` says they were not listed, so the empty
    list is never taken for a host running nothing; a warning (one line) says the same."""
    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")
    (root / "dev").mkdir(exist_ok=True)
    (root / "dev" / "neuron0").write_bytes(b"not a device")
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "1s", "neuron_runtimes": [{"metrics": [{"type": "memory_used"}]}]}))
    args = ("--root", str(root), "-c", str(conf), "--exact-groups", "--once", "--no-imds", "--verbose", "2")
    out = subprocess.run(daemon_cmd(*args), capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["neuron_runtime_data"] == []
    error = report["neuron_monitor"]["error"]
    assert error.startswith("Neuron applications not listed: neuron0: opening it failed: ")
    warnings = [line for line in out.stderr.splitlines() if "cannot be listed" in line]
    assert len(warnings) == 1 and "Traceback" not in out.stderr


def test_a_failed_read_leaves_every_groups_sources_listed(tmp_path: Path) -> None:
    """A failed read makes a group look for the device's nodes again; until it does, what was found stays in
    ``neuron_monitor.sources`` (before: the health group's emptied to ``layout none, found {}``, and the counter
    group's to the one node looked up after the failure, so a blind group's ``required`` and the exporter's
    ``neuron_monitor_source_found{source="all"}`` said nothing was missing)."""
    root = tmp_path / "root"
    build(root, "trn1.2xlarge", "2.30.2.0")
    readable = json.loads(subprocess.run(daemon_cmd("--root", str(root), "--once", "--no-imds"), capture_output=True,
                                         text=True, timeout=TIMEOUT, check=True).stdout.splitlines()[-1])  # fmt: skip
    _fifo(root / DEVICES / "neuron0" / "stats" / "hardware" / "mem_ecc_uncorrected")
    blind = json.loads(subprocess.run(daemon_cmd("--root", str(root), "--once", "--no-imds"), capture_output=True,
                                      text=True, timeout=TIMEOUT, check=True).stdout.splitlines()[-1])  # fmt: skip
    before, after = readable["neuron_monitor"]["sources"], blind["neuron_monitor"]["sources"]
    assert set(after) == set(before) == {"neuron_device_health", "neuron_hw_counters", "neuron_device_telemetry"}
    for group, entry in before.items():
        assert after[group]["layout"] == entry["layout"] == "known:stats", group
        assert sorted(after[group]["found"]) == sorted(entry["found"]), group
        assert after[group]["required"] == entry["required"], group
