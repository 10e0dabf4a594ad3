"""For every simulated shape, the Neuron groups' key structure matches the real reports in shared/reference/reports.

Key paths are compared per group, with map keys normalised (core indexes, subgraph names, physical-core names).
Every path of the real reports must exist in ours; ours may only add the documented extras (``flops``, the
``v3d``-style physical breakdown, ``fresh``) and percentiles where the sample had ``null``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.daemon import report as rpt
from neuron_monitor.groups.execution_stats.collector import ExecutionStats
from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.groups.neuroncore_counters.collector import NeuroncoreCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import App
from neuron_monitor.neuron.backend import open_backend
from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.shapes import SHAPES, get_shape
from neuron_monitor.sim.temporary import TemporarySimulator

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "fixtures" / "reports"
RUNTIME_GROUPS = ("execution_stats", "memory_used", "neuroncore_counters")
EXTRA = re.compile(r"(^fresh$|\.fresh$|\.flops$|\.<vNd>(\.|$)|^neuron_hardware_info\.|^report_time$)")


def _norm(key: str) -> str:
    if key.isdigit():
        return "<n>"
    if re.fullmatch(r"sg_\d+", key):
        return "<sg>"
    if re.fullmatch(r"v\dd", key):
        return "<vNd>"
    if re.fullmatch(r"nc_v\d\.\d+", key):
        return "<phys>"
    return key


def key_paths(obj: Any, prefix: str = "") -> set[str]:
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{prefix}.{_norm(k)}" if prefix else _norm(k)
            out.add(p)
            out |= key_paths(v, p)
    elif isinstance(obj, list):
        for v in obj:
            out |= key_paths(v, prefix + "[]")
    return out


def reference_paths() -> tuple[dict[str, set[str]], set[str]]:
    groups: dict[str, set[str]] = {}
    nulls: set[str] = set()
    files = sorted(REFERENCE.glob("*.json*"))
    assert len(files) == 2, f"the two reference reports belong in {REFERENCE}"
    for f in files:
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            report = json.loads(line)
            for entry in report["neuron_runtime_data"]:
                for name, obj in entry["report"].items():
                    groups.setdefault(name, set()).update(key_paths(obj))
                    if name == "execution_stats":
                        for k, v in obj["latency_stats"].items():
                            if v is None:
                                nulls.add(f"latency_stats.{k}")
            hw = report["system_data"]["neuron_hw_counters"]
            groups.setdefault("neuron_hw_counters", set()).update(key_paths(hw))
    return groups, nulls


def compare(name: str, ours: set[str], ref: set[str]) -> None:
    missing = ref - ours
    assert not missing, f"{name}: keys of the real reports missing from ours: {sorted(missing)}"
    extra = {p for p in ours - ref if not EXTRA.search(p) and not p.startswith("latency_stats.")}
    assert not extra, f"{name}: keys not in the real reports: {sorted(extra)}"


@pytest.mark.parametrize("shape_name", [*SHAPES, "trn2.48xlarge:lnc1"])
def test_group_key_structure_matches_real_reports(tmp_path: Path, shape_name: str) -> None:
    name, _, variant = shape_name.partition(":")
    shape = get_shape(name, 1 if variant == "lnc1" else None)
    opts = {"load_time": 0.0, "worker_cpu": 0, "memory_interval": 0, "exec_rate": 100.0}
    sim = Simulator(tmp_path / "root", shape, 2, 3, opts)
    backend = open_backend(RootFS(tmp_path / "root"))
    try:
        root = RootFS(tmp_path / "root")
        groups = {"execution_stats": ExecutionStats(root), "memory_used": MemoryUsed(root),
                  "neuroncore_counters": NeuroncoreCounters(root)}  # fmt: skip
        hw = NeuronHwCounters(root)
        hw.prime()
        apps: list[App] = backend.apps.snapshot()
        for g in groups.values():
            g.collect(apps, [])
        now = sim._last
        for _ in range(5):
            now += 0.05
            sim.step(now)
        apps = backend.apps.snapshot()
        assert len(apps) == 2
        ref, _nulls = reference_paths()
        for gname, g in groups.items():
            body = g.collect(apps, [])[apps[0].pid]
            obj = rpt.group_object(body, 1.0, "", True)
            compare(gname, key_paths(obj), ref[gname])
        hw_body = hw.collect()
        hw_ref = ref["neuron_hw_counters"]
        if not shape.has_ecc_files:  # Inf1: no ECC file to read, so no counter (left out and named, never 0)
            hw_ref = {k for k in hw_ref if "_ecc_" not in k}
            assert "mem_ecc_uncorrected not exposed by the driver" in hw_body["error"]
        compare("neuron_hw_counters", key_paths(rpt.group_object(hw_body, 1.0, "", True)), hw_ref)
        cores = groups["neuroncore_counters"].collect(apps, [])[apps[0].pid]["neuroncores_in_use"]
        if shape.lnc == 2:
            assert all(set(c) == {"neuroncore_utilization", "flops", f"{shape.nc_arch[2:].lower()}d"}
                       for c in cores.values())  # fmt: skip
        info = backend.hardware_info()
        assert info["error"] == ""
        assert info["neuron_device_count"] == shape.devices
        assert info["neuroncore_per_device_count"] == shape.phys_cores // shape.lnc
        assert info["logical_neuroncore_config"] == shape.lnc
    finally:
        backend.close()
        sim.shutdown()


@pytest.mark.e2e
def test_daemon_report_structure_against_the_simulator(tmp_path: Path) -> None:
    """The real daemon on the simulator: the whole report's key paths cover the real reports'."""
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({
        "period": "500ms",
        "neuron_runtimes": [{"tag_filter": ".*", "metrics": [{"type": t} for t in
                             ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")]}],
        "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"}, {"type": "neuron_hw_counters"}],
    }))  # fmt: skip
    with TemporarySimulator("trn1.32xlarge", runtimes=2, seed=5, load_time=0.0) as sim:
        proc = subprocess.Popen([sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf),
                                 "--root", str(sim.root), "--no-imds"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)  # fmt: skip
        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        deadline = time.monotonic() + 20
        while len(lines) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        proc.terminate()
        proc.wait(10)
        reader.join(5)
    assert len(lines) >= 3, proc.stderr.read().decode()  # type: ignore[union-attr]
    report = json.loads(lines[-1])
    ours = key_paths(report)
    for f in sorted(REFERENCE.glob("*.json*")):
        for line in f.read_text().splitlines():
            ref = key_paths(json.loads(line))
            missing = {
                p for p in ref - ours if not p.startswith("neuron_runtime_data[].report.execution_stats.latency")
            }
            missing = {p for p in missing if "instance_info" not in p}  # IMDS is off here
            assert not missing, f"{f.name}: {sorted(missing)}"
    assert {e["neuron_runtime_tag"] for e in report["neuron_runtime_data"]} == {"job-00", "job-01"}
    assert report["neuron_hardware_info"]["neuron_device_type"] == "trainium"
