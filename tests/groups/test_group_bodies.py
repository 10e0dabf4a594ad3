"""One definition of a group's body (issue 38 item 3): a group's ``body.py`` holds its keys (constants) and their
types (a TypedDict); the collector builds that TypedDict and the spec reads through the constants. Checked here:
the constants are the TypedDict's keys, and the body a collector returns on real-format bytes has exactly them
(and reads back through the spec without a problem)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, get_type_hints

from neuron_monitor.groups.memory_info import body as memory_info_body
from neuron_monitor.groups.memory_info.collector import MemoryInfo
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.schema.spec import registry
from neuron_monitor.schema.values import Problems
from tests.conftest import group_testdata


def _reads_back(group: str, body: dict[str, Any]) -> None:
    spec = registry().get(group)
    assert spec is not None
    problems = Problems()
    spec.read(body, f"system_data.{group}", problems)
    assert not problems, (problems.counts, problems.values)


def test_memory_info_keys_are_defined_once(tmp_path: Path) -> None:
    keys = list(get_type_hints(memory_info_body.MemoryInfoBody))
    assert list(memory_info_body.FIELDS) == keys
    (tmp_path / "proc").mkdir()
    shutil.copy(group_testdata("memory_info", "meminfo_trn2"), tmp_path / "proc" / "meminfo")
    group = MemoryInfo(RootFS(tmp_path))
    body = group.collect()
    group.close()
    assert list(body) == keys
    assert all(isinstance(body[k], int) for k in keys)
    _reads_back("memory_info", body)
