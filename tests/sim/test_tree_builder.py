"""The simulator's tree builder: each directory made once, and `TreeBuilder.remove` takes away the whole tree (its
own files without listing them, anything else there with rmtree) and nothing outside it; a TemporarySimulator starts
once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_monitor.sim.animator import Simulator
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.temporary import TREE_DIR_ENV, TemporarySimulator
from neuron_monitor.sim.tree import DeviceTree, TreeBuilder, write_host_files


def test_make_is_mkdir_p_and_remembers(tmp_path: Path) -> None:
    b = TreeBuilder()
    deep = str(tmp_path / "a" / "b" / "c")
    assert b.make(deep) == deep and os.path.isdir(deep)
    (tmp_path / "a" / "b" / "c").rmdir()  # made once: the builder does not look again
    assert b.make(deep) == deep and not os.path.exists(deep)
    b.write(str(tmp_path / "x" / "y" / "f"), "1\n")
    assert (tmp_path / "x" / "y" / "f").read_bytes() == b"1\n"
    b.write(str(tmp_path / "x" / "y" / "f"), b"22")  # written again: truncated, not appended
    assert (tmp_path / "x" / "y" / "f").read_bytes() == b"22"


def test_a_device_tree_over_an_existing_one_is_the_same(tmp_path: Path) -> None:
    shape = get_shape("trn2.48xlarge")
    write_host_files(tmp_path, shape, "2.30.2.0", 2)
    first = DeviceTree(tmp_path, shape, 0, "2.30.2.0")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    first.close()
    again = DeviceTree(tmp_path, shape, 0, "2.30.2.0")  # every file and directory already there
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == files
    assert (again.dir / "core_count").read_text() == str(shape.phys_cores)
    again.close()


def test_remove_takes_the_tree_and_what_others_added_but_nothing_beside_it(tmp_path: Path) -> None:
    top = tmp_path / "tree"
    beside = tmp_path / "tree-beside"  # shares the prefix "tree" as a string: must stay
    beside.mkdir()
    (beside / "keep").write_text("keep")
    sim = Simulator(top / "root", get_shape("trn1.32xlarge"), 1, 0, {"worker_cpu": 0})
    try:
        assert len(sim.builder.files) > 500 and len(sim.builder.made) > 300
        stats = sim.devices[0].dir / "stats"
        (stats / "not-made-by-the-builder").write_text("x")  # a file in a directory it made
        (stats / "extra" / "deeper").mkdir(parents=True)  # a directory it did not make, not empty
        (stats / "extra" / "deeper" / "f").write_text("x")
        (top / "sim.stderr").write_text("")  # the owner's file beside the root
    finally:
        sim.shutdown()
    sim.builder.remove(str(top))
    assert not top.exists()
    assert (beside / "keep").read_text() == "keep"


def test_remove_of_a_missing_tree_is_quiet(tmp_path: Path) -> None:
    b = TreeBuilder()
    b.write(str(tmp_path / "t" / "f"), "x")
    b.remove(str(tmp_path / "t"))
    b.remove(str(tmp_path / "t"))  # again: nothing left, no error
    assert not (tmp_path / "t").exists()


def test_a_temporary_simulator_starts_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(TREE_DIR_ENV, str(tmp_path))
    with TemporarySimulator("trn1.2xlarge", runtimes=1, worker_cpu=0) as sim:
        with pytest.raises(RuntimeError, match="already started"):
            sim.start()
        assert sim.truth.ready() is not None  # the running one is untouched
    assert list(tmp_path.iterdir()) == []  # and its tree is gone with it
