"""`neuron-monitor --capture` end to end: real daemon processes capture a simulated host (paused, so the moment
holds still), the archive replays to the report the host gave (`tests/captures/replay.py`), a trn2.48xlarge capture
stays far under 20 MB, redaction leaves no tag or model name anywhere in the archive and the replay still parses,
and nothing of the environment reaches the archive."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.captures.replay import env_with, extract, members, replay, same_report
from tests.conftest import daemon_cmd

SECRET = "sekrit-0b5e7c1d-never-in-a-capture"


def _capture(root: Path, archive: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = env_with(NEURON_TEST_SECRET=SECRET, AWS_SECRET_ACCESS_KEY=SECRET, AWS_SESSION_TOKEN=SECRET)
    return subprocess.run(
        daemon_cmd("--root", str(root), "--capture", str(archive), "--no-imds", *extra),
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


def test_capture_replays_to_the_host_report(tmp_path: Path) -> None:
    # every other shape and the reorganized layouts: tests/captures/test_captures.py
    shape = "trn2.48xlarge"
    archive = tmp_path / "capture.tar.gz"
    with TemporarySimulator(shape, runtimes=3, seed=7) as sim:
        sim.pause()
        out = _capture(sim.root, archive)
        assert out.returncode == 0, out.stderr
        assert f"wrote {archive}" in out.stderr
    assert archive.stat().st_size < 20 * 1024 * 1024
    assert archive.stat().st_mode & 0o077 == 0  # the user's own file
    root = extract(archive, tmp_path / "x")
    host = json.loads((root / "capture/report.json").read_text())
    assert host["neuron_runtime_data"], "the host report has runtimes to replay"
    replayed = replay(root)
    assert same_report(host, replayed) == []
    info = json.loads((root / "capture/info.json").read_text())
    assert info["instance_type"] == shape and info["driver_version"] and info["data_blocks"] > 0
    check = json.loads((root / "capture/check.json").read_text())
    assert check["exit_code"] == 0
    # the replayed root passes --check too
    again = subprocess.run(daemon_cmd("--root", str(root), "--check", "--no-imds"), capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stdout
    blob = b"".join(members(archive).values())
    assert SECRET.encode() not in blob


def test_redacted_capture_has_no_tag_or_model_name(tmp_path: Path) -> None:
    plain, redacted = tmp_path / "plain.tar.gz", tmp_path / "redacted.tar.gz"
    with TemporarySimulator("trn2.48xlarge", runtimes=4, seed=11) as sim:
        sim.pause()
        assert _capture(sim.root, plain).returncode == 0
        assert _capture(sim.root, redacted, "--redact").returncode == 0
    host = json.loads(members(plain)["capture/report.json"])
    tags = {r["neuron_runtime_tag"] for r in host["neuron_runtime_data"]}
    models = {
        m["name"]
        for r in host["neuron_runtime_data"]
        for m in r["report"].get("memory_used", {}).get("loaded_models", []) or []
        if isinstance(m, dict) and m.get("name")
    }
    assert tags
    blob = b"".join(members(redacted).values())
    for name in tags | models:
        assert name.encode() not in blob, name
    root = extract(redacted, tmp_path / "x")
    replayed = replay(root)
    assert {r["neuron_runtime_tag"] for r in replayed["neuron_runtime_data"]} == {f"runtime-{i}" for i in range(1, 5)}
    assert same_report(json.loads((root / "capture/report.json").read_text()), replayed) == []


def test_capture_leaves_out_the_efa_node_description(tmp_path: Path) -> None:
    """rdma-ndd writes the host's name into each EFA adapter's ``node_desc``: a capture never copies it."""
    archive = tmp_path / "capture.tar.gz"
    host_name = "ip-10-1-2-3-secret-host"
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=3) as sim:
        sim.pause()
        adapters = sorted((sim.root / "sys/class/infiniband").iterdir())
        assert adapters, "the simulated trn2.48xlarge has EFA adapters"
        for adapter in adapters:
            (adapter.resolve() / "node_desc").write_text(f"{host_name} {adapter.name}\n")
        out = _capture(sim.root, archive)
        assert out.returncode == 0, out.stderr
    got = members(archive)
    assert not [name for name in got if name.endswith("/node_desc")]
    assert host_name.encode() not in b"".join(got.values())
    assert b"node_desc: left out" in got["capture/skipped.txt"]


def test_usage_errors() -> None:
    out = subprocess.run(daemon_cmd("--redact"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--redact goes with --capture" in out.stderr
    out = subprocess.run(daemon_cmd("--capture", "/nonexistent-dir/x.tar.gz", "--simulate", "trn1.2xlarge"),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 2 and "no such directory" in out.stderr
