"""The compiled helper uses only CPython's stable ABI of the oldest supported Python (3.10), so one abi3 wheel serves
every CPython >= 3.10 (issue 43 item 5): it compiles with -DPy_LIMITED_API=0x030A0000 -Werror (an API outside the
limited one is an implicit declaration, hence an error), and the same binary loads and computes right under every
other CPython >= 3.10 found on this machine (Debian's, pyenv's). The wheel's tag is checked in test_packaging.py."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "neuron_monitor" / "_native.c"
LIMITED = "-DPy_LIMITED_API=0x030A0000"
FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-Werror"]

SMOKE = """
import sys
from array import array
import _native as n
assert n.__file__.endswith("_native.abi3.so"), n.__file__
assert n.deltas(array("Q", [5, 10, 3]), array("Q", [1, 4, 9]), array("I", [0, 1, 2]), 3) == [4, 6, 3]  # 9 -> 3: a reset
assert n.deltas(array("Q", [5]), array("Q", [1, 2]), array("I", [0]), 1) is None  # lengths differ: declined
assert n.deltas([5], [1], array("I", [0]), 1) is None  # not arrays: declined
prev = b"cpu  10 0 10 80 0 0 0 0 0 0\\ncpu0 10 0 10 80 0 0 0 0 0 0\\nctxt 100\\n"
cur = b"cpu  20 0 20 160 0 0 0 0 0 0\\ncpu0 20 0 20 160 0 0 0 0 0 0\\nctxt 150\\n"
body = n.vcpu_usage(prev, cur)
assert body is None or isinstance(body, dict), body
print("%d.%d" % sys.version_info[:2])
"""


def _compiler() -> str:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if cc is None or not include.is_file():
        pytest.skip("no C compiler or no Python headers here (the helper is optional)")
    return cc


def test_the_helper_compiles_under_the_limited_api() -> None:
    cc = _compiler()
    include = sysconfig.get_paths()["include"]
    got = subprocess.run([cc, "-fsyntax-only", LIMITED, *FLAGS, f"-I{include}", str(SOURCE)], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]


def test_setup_builds_it_so() -> None:
    setup = (REPO / "setup.py").read_text()
    assert 'LIMITED_API = ("Py_LIMITED_API", "0x030A0000")' in setup and "py_limited_api=True" in setup
    assert '"py_limited_api": ABI3_TAG' in setup and 'ABI3_TAG = "cp310"' in setup
    assert 'requires-python = ">=3.10"' in (REPO / "pyproject.toml").read_text()  # the oldest: the ABI's version


def other_interpreters() -> dict[str, str]:
    """CPython >= 3.10 found here, by version (this one included)."""
    found: dict[str, str] = {}
    candidates = [shutil.which(f"python3.{minor}") for minor in range(10, 16)]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3")) + sorted(glob.glob("/usr/bin/python3.*"))
    for exe in filter(None, candidates):
        if not os.access(exe, os.X_OK) or exe.endswith("-config"):
            continue
        got = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name)"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        if got.returncode == 0:
            version, impl = got.stdout.split()
            if impl == "cpython" and tuple(map(int, version.split("."))) >= (3, 10):
                found.setdefault(version, exe)
    return found


def test_one_binary_runs_under_every_cpython_here(tmp_path: Path) -> None:
    cc = _compiler()
    include = sysconfig.get_paths()["include"]
    so = tmp_path / "_native.abi3.so"
    built = subprocess.run([cc, "-shared", "-fPIC", LIMITED, *FLAGS, f"-I{include}", str(SOURCE), "-o", str(so)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    interpreters = other_interpreters()
    interpreters.setdefault(f"{sys.version_info[0]}.{sys.version_info[1]}", sys.executable)
    for version, exe in sorted(interpreters.items()):
        got = subprocess.run([exe, "-c", SMOKE], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                             env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path)})  # fmt: skip
        assert got.returncode == 0, (version, exe, got.stderr[-2000:])
        assert got.stdout.strip() == version
    if len(interpreters) < 2:
        pytest.skip("only this interpreter here: the binary ran under it alone")
