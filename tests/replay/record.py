"""Record the replay test's simulated inputs: the real daemon against the simulator, with faults injected.

    .venv/bin/python -m tests.replay.record   # rewrites tests/replay/recorded/sim_*.jsonl.gz

Each shape runs the daemon (every group, 1 s period, a fake IMDS answering the shape) for a few reports while the
simulator injects a numerical-error burst, uncorrected ECC events, a hung runtime and a runtime that exits, so the
consumers' error, ECC, hang and vanish paths all have data. The recordings are inputs: they are made once and kept;
re-recording them means regenerating the goldens (``tests.replay.make_goldens``) with the consumers of that commit.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.host.fake_imds import METADATA, FakeImds

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORDED = HERE / "recorded"

# name -> (shape, runtimes, reports to keep)
SHAPES = {
    "sim_trn1_32xlarge": ("trn1.32xlarge", 4, 10),
    "sim_trn2_48xlarge_16rt": ("trn2.48xlarge", 16, 8),
    "sim_trn3_48xlarge": ("trn3.48xlarge", 4, 8),
}
GROUPS = {
    "period": "1s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [
                {"type": "neuroncore_counters"},
                {"type": "memory_used"},
                {"type": "neuron_runtime_vcpu_usage"},
                {"type": "execution_stats"},
            ],
        }
    ],
    "system_metrics": [
        {"type": "vcpu_usage"},
        {"type": "memory_info"},
        {"type": "neuron_hw_counters"},
        {"type": "neuron_device_telemetry"},
    ],
}


def faults(runtimes: int) -> list[dict[str, object]]:
    """Errors on job-00, ECC on device 0, job-01 hangs, the last runtime exits (when there are enough runtimes)."""
    out: list[dict[str, object]] = [
        {"at": 1.5, "kind": "numerical_burst", "tag": "job-00", "count": 40},
        {"at": 2.5, "kind": "ecc_uncorrected", "device": 0, "count": 2, "memory": "mem"},
        {"at": 2.5, "kind": "ecc_corrected", "device": 1, "count": 5, "memory": "sram"},
        {"at": 3.0, "kind": "hardware_error", "tag": "job-00", "count": 3},
    ]
    if runtimes >= 2:
        out.append({"at": 1.0, "kind": "hang_runtime", "tag": "job-01"})
    if runtimes >= 3:
        out.append({"at": 5.0, "kind": "stop_runtime", "tag": f"job-{runtimes - 1:02d}"})
    return out


def record(name: str, shape: str, runtimes: int, keep: int) -> list[bytes]:
    metadata = dict(METADATA, **{"instance-type": shape, "instance-id": "i-0replay0000000001"})
    with tempfile.TemporaryDirectory() as tmp, FakeImds(metadata=metadata) as imds:
        conf = Path(tmp) / "monitor.conf"
        conf.write_text(json.dumps(GROUPS))
        sim = TemporarySimulator(shape, runtimes=runtimes, seed=7, faults=faults(runtimes), exec_rate=200, errors=True)
        with sim:
            cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "-c", str(conf), "--root", str(sim.root)]
            cmd += ["--imds-endpoint", imds.endpoint]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
            assert proc.stdout is not None
            lines: list[bytes] = []
            deadline = time.monotonic() + 120
            while len(lines) < keep and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                if line.strip():
                    lines.append(line)
            proc.terminate()
            proc.wait(10)
    if len(lines) < keep:
        raise RuntimeError(f"{name}: {len(lines)} reports, wanted {keep}")
    return lines


def main() -> int:
    RECORDED.mkdir(exist_ok=True)
    for name, (shape, runtimes, keep) in SHAPES.items():
        lines = record(name, shape, runtimes, keep)
        (RECORDED / f"{name}.jsonl.gz").write_bytes(gzip.compress(b"".join(lines), mtime=0))
        print(f"{name}: {len(lines)} reports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
