"""The replay test's inputs: recorded simulated reports (trn1, trn2 with 16 runtimes, trn3) and AWS's real ones."""

from __future__ import annotations

import gzip
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
GOLDEN = HERE / "golden"
AWS_REPORTS = HERE.parent / "fixtures" / "reports"


def inputs() -> dict[str, list[bytes]]:
    """name -> report lines, for every recording."""
    out: dict[str, list[bytes]] = {}
    for path in sorted(RECORDED.glob("*.jsonl.gz")):
        out[path.name.removesuffix(".jsonl.gz")] = _lines(gzip.decompress(path.read_bytes()))
    for path in sorted(AWS_REPORTS.glob("*.json*")):
        out["aws_" + path.name.split(".")[0]] = _lines(path.read_bytes())
    return out


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.splitlines() if line.strip()]


def golden_path(name: str, consumer: str) -> Path:
    return GOLDEN / f"{name}.{consumer}.gz"
