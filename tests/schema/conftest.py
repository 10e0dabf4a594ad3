"""Reports for the schema tests: AWS's real ones and our daemon's simulated trn2/trn3 ones (one run per shape)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "fixtures" / "reports"


def aws_reports() -> list[dict[str, Any]]:
    """Every report line of the real AWS reports kept as fixtures."""
    out = []
    for path in sorted(REFERENCE.glob("*.json*")):
        out += [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return out


@functools.cache
def simulated_report(shape: str) -> dict[str, Any]:
    """One report of ``neuron-monitor --simulate SHAPE --once`` (a real daemon process)."""
    cmd = [sys.executable, "-m", "neuron_monitor.daemon.cli", "--simulate", shape, "--once"]
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=120, cwd=REPO).stdout
    return orjson.loads(next(line for line in out.splitlines() if line.strip()))  # type: ignore[no-any-return]
