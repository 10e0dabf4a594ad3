"""Shared test helpers: the repository root, a fake procfs root built from fixture files, and a collection of
cyclic garbage after each test module."""

from __future__ import annotations

import gc
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
GROUPS = REPO / "neuron_monitor" / "groups"


def group_testdata(group: str, name: str) -> Path:
    """A file of a group's captured test data (``neuron_monitor/groups/<group>/testdata/<name>``)."""
    return GROUPS / group / "testdata" / name


def daemon_cmd(*args: str) -> list[str]:
    """The daemon as a subprocess, working with or without the package installed."""
    return [sys.executable, "-m", "neuron_monitor.daemon.cli", *args]


@pytest.fixture
def fake_root_192(tmp_path: Path) -> Path:
    """A root whose /proc has a 192-vCPU /proc/stat and a trn2-sized /proc/meminfo."""
    proc = tmp_path / "proc"
    proc.mkdir()
    shutil.copy(group_testdata("vcpu_usage", "stat_192cpu"), proc / "stat")
    shutil.copy(group_testdata("memory_info", "meminfo_trn2"), proc / "meminfo")
    (proc / "uptime").write_text("12345.67 23456.78\n")
    return tmp_path


@pytest.fixture(autouse=True, scope="module")
def _collect_cycles_after_the_module() -> Iterator[None]:
    """Simulated devices and group objects that a test drops are freed with their kept descriptors by the cyclic
    collector, which in a long session reaches old objects seldom: hundreds of descriptors could stay open from
    module to module. One full collection per module keeps the session's descriptors bounded."""
    yield
    gc.collect()
