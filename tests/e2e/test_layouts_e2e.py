"""The daemon as a process on each driver layout the simulator imitates (``--sim-driver``): every group reports
what it reports on today's layout (no group error, the same keys, the same hardware info), and the report's
``neuron_monitor.sources`` says which layout each Neuron group recognized (the reorganized ones are discovered:
the readers do not know them)."""

from __future__ import annotations

import json
import subprocess
from functools import cache
from typing import Any

import pytest

from neuron_monitor.sim.layouts import REORGANIZED
from tests.conftest import REPO, SIM_LAYOUTS, daemon_cmd

pytestmark = pytest.mark.e2e

EXPECTED_LAYOUT = {
    "2.30.2.0": dict.fromkeys(("neuron_hw_counters", "neuron_device_telemetry", "neuron_device_health"), "known:stats"),
    "moved-cores": {  # only the cores moved: the device nodes stay where today's layout has them
        "neuron_hw_counters": "known:stats",
        "neuron_device_telemetry": "discovered",
        "neuron_device_health": "known:stats",
    },
    "regrouped": dict.fromkeys(("neuron_hw_counters", "neuron_device_telemetry", "neuron_device_health"), "discovered"),
}


@cache
def report(driver: str) -> dict[str, Any]:
    cmd = daemon_cmd(
        "--simulate", "trn2.48xlarge", "--sim-driver", driver, "--sim-runtimes", "2", "--once", "--no-imds"
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("{"))
    return json.loads(line)  # type: ignore[no-any-return]


def keys(obj: Any, at: str = "") -> set[str]:
    """The key paths of a JSON value (list items merged, device and core indexes as one)."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            name = "<n>" if k.isdigit() else k
            out.add(f"{at}.{name}")
            out |= keys(v, f"{at}.{name}")
    elif isinstance(obj, list):
        for v in obj:
            out |= keys(v, f"{at}[]")
    return out


@pytest.mark.parametrize("driver", SIM_LAYOUTS)
def test_every_group_reports_the_same_on_every_layout(driver: str) -> None:
    base, got = report(SIM_LAYOUTS[0]), report(driver)
    assert {name: g["error"] for name, g in got["system_data"].items()} == dict.fromkeys(base["system_data"], "")
    for name, group in got["system_data"].items():
        assert keys(group) == keys(base["system_data"][name]), name
    assert got["neuron_hardware_info"] == base["neuron_hardware_info"]
    assert keys(got["neuron_runtime_data"]) == keys(base["neuron_runtime_data"])
    sources = got["neuron_monitor"]["sources"]
    assert {name: s["layout"] for name, s in sources.items()} == EXPECTED_LAYOUT[driver]
    assert all(all(s["found"].values()) for s in sources.values()), sources
    version = REORGANIZED[driver].version if driver in REORGANIZED else driver
    assert got["neuron_monitor"]["driver_version"] == version
    assert got["system_data"]["neuron_device_health"]["node"]["state"] == "healthy"
