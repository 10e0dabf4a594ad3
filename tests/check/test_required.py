"""The families a host must expose (check/required.py): from the health rules' table per architecture and driver
version, on a simulated tree; the daemon's report carries them, read back through the schema."""

from __future__ import annotations

import json
import subprocess

from neuron_monitor.check.required import RequiredFamilies
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.schema.read import read_report
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.conftest import daemon_cmd

ECC = "hardware/mem_ecc_uncorrected"
HEALTH = "health_status/unhealthy_components"


def test_required_by_architecture_and_driver() -> None:
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=1) as sim:
        required = RequiredFamilies(RootFS(sim.root))
        assert {ECC, HEALTH, "power/utilization"} <= required.families("2.31.7.0")
        assert required.families("2.29.0.0") == frozenset()  # before 2.30.2: nothing is required
        assert ECC in required.families("")  # an unreadable version counts as a current driver
        monitor = {"driver_version": "2.31.7.0", "sources": {"g": {"layout": "x", "found": {ECC: True, "a/b": False}}}}
        annotated = required.annotate(monitor)
        assert annotated["sources"]["g"]["required"] == [ECC]
        assert "required" not in monitor["sources"]["g"]  # the group's own object is never changed
        # kept while the inputs are the same objects; a new entry object, or another version, is annotated anew
        assert required.annotate(dict(monitor))["sources"] is annotated["sources"]
        moved = {"layout": "x", "found": {ECC: False, "a/b": True}}
        again = required.annotate({**monitor, "sources": {"g": moved}})
        assert again["sources"]["g"] == {**moved, "required": [ECC]} and "required" not in moved
        older = required.annotate({**monitor, "sources": {"g": moved}, "driver_version": "2.29.0.0"})
        assert older["sources"]["g"]["required"] == []
        assert required.annotate(monitor)["sources"]["g"]["required"] == [ECC]
    with TemporarySimulator("trn1.2xlarge", runtimes=1, seed=1) as sim:
        families = RequiredFamilies(RootFS(sim.root)).families("2.31.7.0")
        assert ECC in families and HEALTH not in families  # Trainium1 has no health_status nodes


def test_the_daemons_report_carries_required() -> None:
    with TemporarySimulator("trn2.48xlarge", runtimes=1, seed=1) as sim:
        out = subprocess.run(daemon_cmd("--root", str(sim.root), "--once", "--no-imds"), capture_output=True,
                             text=True, timeout=300, check=True)  # fmt: skip
    sources = read_report(json.loads(out.stdout.strip().splitlines()[-1])).sources
    assert sources is not None
    health = sources.groups["neuron_device_health"]
    assert HEALTH in health.required and health.required_missing == []
