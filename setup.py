"""The optional compiled helper (neuron_monitor/_native.c, built against the stable ABI: one abi3 wheel for every
supported CPython), the Grafana dashboard and the host files (neuron_monitor/install/) shipped as package data;
everything else is configured in pyproject.toml.

``optional=True``: without a C compiler (or Python headers) the install still succeeds and the package runs on the
pure-Python twins of the helper's functions (see docs/performance.md).

The dashboard's source is ``dashboards/neuron-monitor.json`` (where Grafana provisioning and the docs find it);
a build copies it into the package as ``neuron_monitor/exporters/prometheus/dashboard.json``, which the exporter
serves at ``/dashboard.json`` (an editable install reads the source tree's copy).
"""

import runpy
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

DASHBOARD = Path("dashboards") / "neuron-monitor.json"
PACKAGED_DASHBOARD = Path("neuron_monitor") / "exporters" / "prometheus" / "dashboard.json"


SHIPPED_LIST = runpy.run_path(str(Path("neuron_monitor") / "install" / "shipped_list.py"))


def shipped_files() -> list[Path]:
    """The host files the package ships (neuron_monitor/install/shipped_list.py), relative to the source tree."""
    out: list[Path] = []
    for entry in SHIPPED_LIST["SHIPPED"]:
        path = Path(entry)
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [
            p
            for p in found
            if p.suffix not in SHIPPED_LIST["SKIPPED_SUFFIXES"]
            and not set(p.parts) & set(SHIPPED_LIST["SKIPPED_PARTS"])
        ]
    return out


class BuildWithDashboard(build_py):
    """build_py, plus the dashboard copied into the built package (a wheel, or a wheel built from the sdist), and
    the shipped host files into its ``_shipped/`` folder (neuron-monitor-install writes them out)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / PACKAGED_DASHBOARD
            self.mkpath(str(target.parent))
            self.copy_file(str(DASHBOARD), str(target))
            for source in shipped_files():
                target = Path(self.build_lib) / "neuron_monitor" / "_shipped" / source
                self.mkpath(str(target.parent))
                self.copy_file(str(source), str(target))


class BuildExtAbi3(build_ext):
    """build_ext, removing an in-place helper of an older, interpreter-specific build first: Python prefers
    ``_native.cpython-3XX-*.so`` to ``_native.abi3.so``, so a stale one would shadow the new build."""

    def run(self) -> None:
        if self.inplace or getattr(self, "editable_mode", False):
            for stale in Path("neuron_monitor").glob("_native.cpython-*.so"):
                stale.unlink()
        super().run()


# The helper uses the stable ABI of the oldest supported Python (requires-python), so one abi3 wheel serves every
# CPython from 3.10 on (_native.c, "The stable ABI"; tests/deploy/test_abi3.py).
LIMITED_API = ("Py_LIMITED_API", "0x030A0000")
ABI3_TAG = "cp310"

setup(
    cmdclass={"build_py": BuildWithDashboard, "build_ext": BuildExtAbi3},
    ext_modules=[
        Extension(
            "neuron_monitor._native",
            ["neuron_monitor/_native.c"],
            optional=True,
            define_macros=[LIMITED_API],
            py_limited_api=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ],
    options={"bdist_wheel": {"py_limited_api": ABI3_TAG}},
)
