"""A plain driver version keeps the tree it has always had: one device's files (path and content) for a few shapes
and versions, against listings made before the simulator's parts were split out and the reorganized layouts added
(the split was checked byte-identical then). A change to a group's part that moves or rewrites a node of today's
layouts fails here; a deliberate one regenerates the listings:

    .venv/bin/python -m tests.sim.test_tree_golden
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, TreeBuilder, write_host_files

GOLDEN = Path(__file__).resolve().parent / "golden"
# (shape, driver, device): the versions whose layouts differ (stats under metrics/ before 2.8; the repairable ECC
# counter from 2.23; corrected ECC and live counters from 2.30; health status from 2.30.2) on chips with and
# without ECC files
CASES = (
    ("trn1.2xlarge", "2.30.2.0", 0),
    ("trn2.48xlarge", "2.30.2.0", 3),
    ("inf2.24xlarge", "2.7.0.0", 0),
    ("inf2.xlarge", "2.24.7.0", 0),
    ("inf1.6xlarge", "2.24.7.0", 1),
)


def listing(root: Path, shape: str, driver: str, device: int) -> str:
    """Every file of ``neuron<device>`` and the host files, one ``path: content`` line each (content escaped)."""
    s = get_shape(shape)
    builder = TreeBuilder()
    write_host_files(root, s, driver, 2 if s.nc_arch in ("NCv3", "NCv4") else 1, builder)
    trees = [DeviceTree(root, s, i, driver, builder) for i in range(s.devices)]
    try:
        lines = []
        for top in (f"sys/devices/virtual/neuron_device/neuron{device}", "sys/module", "sys/class", "opt"):
            for dirpath, _, files in os.walk(root / top):
                for name in files:
                    path = Path(dirpath) / name
                    content = path.read_bytes().decode().encode("unicode_escape").decode()
                    lines.append(f"{path.relative_to(root)}: {content}")
        return "\n".join(sorted(lines)) + "\n"
    finally:
        for t in trees:
            t.close()


def golden_file(shape: str, driver: str, device: int) -> Path:
    return GOLDEN / f"tree_{shape}_{driver}_dev{device}.txt"


@pytest.mark.parametrize(("shape", "driver", "device"), CASES)
def test_a_plain_version_keeps_its_tree(tmp_path: Path, shape: str, driver: str, device: int) -> None:
    expected = golden_file(shape, driver, device).read_text()
    got = listing(tmp_path, shape, driver, device)
    assert got == expected, f"{shape} driver {driver}: the tree changed (regenerate only if meant: see docstring)"


if __name__ == "__main__":
    import tempfile

    for case in CASES:
        with tempfile.TemporaryDirectory() as d:
            golden_file(*case).write_text(listing(Path(d), *case))
    sys.stdout.write(f"wrote {len(CASES)} listings to {GOLDEN}\n")
