"""Replaying a capture and comparing the report it gives with the report the host gave (``capture/report.json``).

`extract(archive, into)` extracts a capture safely (regular files, directories and links inside the tree only);
`replay(root)` runs ``neuron-monitor --root <root> --once --no-imds`` as a real process; `same_report(host,
replayed)` returns the differences (empty when they match). Per-period counts and times differ by nature (a capture
is one moment, so a replay counts nothing new): numbers are compared only where they are levels the capture holds
(the hardware info, memory in use, the EFA join), everything else by structure and text, except what only says
what happened in the period (the latency percentiles, whether a model ran), which a replay cannot give.
`check(root)` runs ``neuron-monitor --root <root> --check --json --no-imds`` and returns its JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from neuron_monitor.capture.walk import FILE_CAP, MAX_MEMBERS, TOTAL_CAP
from neuron_monitor.neuron import layout as L
from tests.conftest import daemon_cmd

SKIP_KEYS = frozenset({"report_time", "period", "fresh", "neuron_monitor", "instance_info", "neuron_k8s_info",
                       # of the period, not levels: a live host's report has the percentiles of the executions in
                       # its window and its models running, a replay (which executes nothing) null and false
                       "latency_stats", "is_running"})  # fmt: skip
LEVEL_GROUPS = frozenset({"memory_used"})  # runtime groups whose numbers are levels (bytes in use)


# What `neuron-monitor --capture` can write (capture/walk.py's caps; a device's data blocks are one member of at
# most NDS_SLOTS blocks, and capture/ adds a few members of its own): an archive past them was not written by it.
MEMBER_BYTES = max(FILE_CAP, L.NDS_SLOTS * L.NDS_SIZE)
ARCHIVE_BYTES = TOTAL_CAP + 16 * 1024 * 1024
ARCHIVE_MEMBERS = MAX_MEMBERS + 64


class NotACapture(ValueError):
    """An archive that `neuron-monitor --capture` cannot have written (past its caps); nothing was extracted."""


def extract(archive: Path, into: Path) -> Path:
    """Extract ``archive`` below ``into`` with tarfile's "data" filter (no absolute paths, no links out, no
    devices); returns ``into``. A capture comes from someone else: its headers are read first and an archive past
    the capture's caps (a member over ``MEMBER_BYTES``, more than ``ARCHIVE_BYTES`` in all, more than
    ``ARCHIVE_MEMBERS`` members: a tarball bomb) raises `NotACapture` before anything is written."""
    with tarfile.open(archive) as tar:
        members, total = [], 0
        for member in tar:  # headers only; stops at the first cap passed, so a huge index is never held
            if len(members) >= ARCHIVE_MEMBERS:
                raise NotACapture(f"{archive}: more than {ARCHIVE_MEMBERS} members: not a capture")
            if member.size > MEMBER_BYTES:
                raise NotACapture(f"{archive}: {member.name[:200]!r} is {member.size} bytes: not a capture")
            total += member.size
            if total > ARCHIVE_BYTES:
                raise NotACapture(f"{archive}: more than {ARCHIVE_BYTES} bytes of content: not a capture")
            members.append(member)
        tar.extractall(into, members=members, filter="data")
    return into


def replay(root: Path, *extra: str) -> dict[str, Any]:
    out = subprocess.run(
        daemon_cmd("--root", str(root), "--once", "--no-imds", *extra),
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def check(root: Path) -> dict[str, Any]:
    """The replayed host's ``--check --json`` (exit 0 or 1; anything else fails)."""
    out = subprocess.run(daemon_cmd("--root", str(root), "--check", "--json", "--no-imds"),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _diff(a: Any, b: Any, where: str, levels: bool, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        ka, kb = set(a) - SKIP_KEYS, set(b) - SKIP_KEYS
        if ka != kb:
            out.append(f"{where}: keys {sorted(ka ^ kb)} differ")
        for k in sorted(ka & kb):
            level = k == "neuron_hardware_info" or k in LEVEL_GROUPS
            _diff(a[k], b[k], f"{where}.{k}", levels or level, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items, {len(b)} replayed")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", levels, out)
    elif isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str) or a is None:
        if a != b:
            out.append(f"{where}: {a!r} != {b!r}")
    elif isinstance(a, int | float) and isinstance(b, int | float):
        if levels and a != b:
            out.append(f"{where}: {a} != {b}")
    elif type(a) is not type(b):
        out.append(f"{where}: {type(a).__name__} != {type(b).__name__}")


def same_report(host: dict[str, Any], replayed: dict[str, Any]) -> list[str]:
    """The differences between the host's report and the replayed one (see the module docstring)."""
    out: list[str] = []
    _diff(host, replayed, "report", False, out)

    def ports(report: dict[str, Any]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = report.get("system_data", {}).get("efa_counters", {}).get("efa_ports", [])
        return found

    for a, b in zip(ports(host), ports(replayed), strict=False):
        if a.get("neuron_device_indexes") != b.get("neuron_device_indexes"):
            out.append(f"efa join of {a.get('efa_device')}: {a.get('neuron_device_indexes')} != "
                       f"{b.get('neuron_device_indexes')}")  # fmt: skip
    return out


def members(archive: Path) -> dict[str, bytes]:
    """Every regular member's bytes, by name."""
    out = {}
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            if m.isfile():
                f = tar.extractfile(m)
                assert f is not None
                out[m.name] = f.read()
    return out


def env_with(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}
