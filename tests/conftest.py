"""Shared test helpers: the repository root, a fake procfs root built from fixture files, the simulator's driver
layouts, a collection of cyclic garbage after each test module, and the two modes of the tests that reach a fast
path.

Both paths are tested (as msgpack's and markupsafe's suites run with and without their C extensions): every test
that reaches a fast path (`reaches_fast_path`: its imports reach a module binding ``NATIVE``) runs twice,
``[compiled]`` with the compiled helper (neuron_monitor/_native.c) and ``[pure]`` with ``NEURON_MONITOR_NO_NATIVE=1``
(for subprocesses) and every in-process ``NATIVE`` set to None, so the pure-Python twins run. Tests whose name says
"native" or "helper" exercise the helper itself: compiled only.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import importlib
import os
import re
import shutil
import signal
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from neuron_monitor.sim.layouts import REORGANIZED
from neuron_monitor.util.early_signals import SIGNALS

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
GROUPS = REPO / "neuron_monitor" / "groups"


# The driver layouts the simulator imitates (sim/layouts.py; where each node lives: docs/neuron-data.md): today's
# layout at its default version, then each reorganized one. A ``driver`` value for TemporarySimulator, the
# Simulator's options, DeviceTree and write_host_files; a group's tests run on each with the ``sim_driver`` fixture
# or ``pytest.mark.parametrize("driver", SIM_LAYOUTS)``.
SIM_LAYOUTS: tuple[str, ...] = ("2.30.2.0", *REORGANIZED)


@pytest.fixture(params=SIM_LAYOUTS)
def sim_driver(request: pytest.FixtureRequest) -> str:
    """Each of `SIM_LAYOUTS` in turn."""
    driver: str = request.param
    return driver


def group_testdata(group: str, name: str) -> Path:
    """A file of a group's captured test data (``neuron_monitor/groups/<group>/testdata/<name>``)."""
    return GROUPS / group / "testdata" / name


def lay_out_sysfs(group: str, name: str, root: Path) -> Path:
    """Write a group's captured sysfs files (``<path>:<line>`` per line, as ``grep -r .`` prints them; a file of
    several lines has one entry per line) under ``root``, with the ``sys/class/neuron_device/neuronN`` links the
    driver makes to ``sys/devices/virtual/neuron_device/neuronN``. Returns ``root``."""
    files: dict[str, list[str]] = {}
    for line in group_testdata(group, name).read_text().splitlines():
        path, _, content = line.partition(":")
        files.setdefault(path, []).append(content)
    for path, lines in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(f"{line}\n" for line in lines))
    devices = root / "sys/devices/virtual/neuron_device"
    if devices.is_dir():
        links = root / "sys/class/neuron_device"
        links.mkdir(parents=True, exist_ok=True)
        for dev in devices.iterdir():
            (links / dev.name).symlink_to(os.path.relpath(dev, links))
    return root


NO_NATIVE_ENV = "NEURON_MONITOR_NO_NATIVE"
_USES_NATIVE = re.compile(r"^from neuron_monitor\.native import NATIVE$", re.M)


# an import statement on its own lines, anywhere: function bodies, and the source of a script a test runs in a
# subprocess (which inherits NEURON_MONITOR_NO_NATIVE); parsing only these is 5x faster than parsing every module
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.M)


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, known: Collection[str]) -> set[str]:
    """The package's and the tests' modules that ``path`` imports, as written anywhere in it."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    nodes: list[ast.stmt] = []
    for m in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        with contextlib.suppress(SyntaxError):  # a template in a string, say
            nodes += ast.parse(m.group(0).strip()).body
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule imported by name
    return found & set(known)


@functools.cache
def fast_path_modules() -> frozenset[str]:
    """The modules (package and tests) whose imports reach a module that binds ``NATIVE``."""
    paths = {_module_name(p): p for top in ("neuron_monitor", "tests") for p in (REPO / top).rglob("*.py")}
    graph = {name: _imports(path, paths) for name, path in paths.items()}
    reached = {name for name, path in paths.items() if name.startswith("neuron_monitor.")
               and _USES_NATIVE.search(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert reached, "no module uses the compiled helper"
    grown = True
    while grown:  # every module that imports a reached one is reached
        more = {name for name, imported in graph.items() if name not in reached and imported & reached}
        reached |= more
        grown = bool(more)
    return frozenset(reached)


@functools.cache
def reaches_fast_path(path: Path) -> bool:
    """A test module reaches a fast path when its imports (followed through the package's and the tests' modules)
    reach a module binding ``NATIVE``: found, not listed, so a new fast path's tests run in both modes without
    anyone adding them. A lazy import (``importlib``) is not followed: a test that reaches a fast path only so
    imports the module it exercises."""
    return _module_name(path.resolve()) in fast_path_modules()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "native_mode" not in metafunc.fixturenames or not reaches_fast_path(metafunc.definition.path):
        return
    name = metafunc.definition.originalname
    modes = ["compiled"] if "native" in name or "helper" in name else ["compiled", "pure"]
    metafunc.parametrize("native_mode", modes, indirect=True, scope="module")


_native_users: list[ModuleType] = []


def native_users() -> list[ModuleType]:
    """Every module of the package that binds ``NATIVE`` (found in the sources, imported once)."""
    if not _native_users:
        for path in sorted((REPO / "neuron_monitor").rglob("*.py")):
            if _USES_NATIVE.search(path.read_text(encoding="utf-8")):
                name = ".".join(path.relative_to(REPO).with_suffix("").parts)
                _native_users.append(importlib.import_module(name))
        assert _native_users, "no module uses the compiled helper"
    return _native_users


@pytest.fixture(autouse=True, scope="module")
def native_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """``compiled`` (as installed) or ``pure``: no compiled helper in this process or in the processes it starts.
    Module-scoped, so hypothesis tests may use it and a module runs all its compiled tests, then its pure ones."""
    mode: str = getattr(request, "param", "compiled")
    if mode != "pure":
        yield mode
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NO_NATIVE_ENV, "1")
        for module in native_users():
            patch.setattr(module, "NATIVE", None)
        yield mode


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


@pytest.fixture(autouse=True)
def _stop_handlers_put_back() -> Iterator[None]:
    """A command's ``main`` called in the test process (``neuron-monitor-top --once``, the exporter) installs its
    SIGHUP/SIGINT/SIGTERM handlers there. They are put back after each test, so a signal to pytest later (a CI job
    cancelled, Ctrl-C) meets pytest's own handling, never a command's: top's and health's handlers arm the stop
    watchdog, which would end the whole run 1.8 s later with status 0."""
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    yield
    for signum, handler in saved.items():
        if handler is not None and signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


@pytest.fixture(autouse=True, scope="module")
def _collect_cycles_after_the_module() -> Iterator[None]:
    """Simulated devices and group objects that a test drops are freed with their kept descriptors by the cyclic
    collector, which in a long session reaches old objects seldom: hundreds of descriptors could stay open from
    module to module. One full collection per module keeps the session's descriptors bounded."""
    yield
    gc.collect()
