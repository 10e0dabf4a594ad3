"""The optional compiled helper (neuron_monitor/_native.c) and the Grafana dashboard shipped as package data;
everything else is configured in pyproject.toml.

``optional=True``: without a C compiler (or Python headers) the install still succeeds and the package runs on the
pure-Python twins of the helper's functions (see docs/performance.md).

The dashboard's source is ``dashboards/neuron-monitor.json`` (where Grafana provisioning and the docs find it);
a build copies it into the package as ``neuron_monitor/exporters/prometheus/dashboard.json``, which the exporter
serves at ``/dashboard.json`` (an editable install reads the source tree's copy).
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

DASHBOARD = Path("dashboards") / "neuron-monitor.json"
PACKAGED_DASHBOARD = Path("neuron_monitor") / "exporters" / "prometheus" / "dashboard.json"


class BuildWithDashboard(build_py):
    """build_py, plus the dashboard copied into the built package (a wheel, or a wheel built from the sdist)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / PACKAGED_DASHBOARD
            self.mkpath(str(target.parent))
            self.copy_file(str(DASHBOARD), str(target))


setup(
    cmdclass={"build_py": BuildWithDashboard},
    ext_modules=[
        Extension(
            "neuron_monitor._native",
            ["neuron_monitor/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ],
)
