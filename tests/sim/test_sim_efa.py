"""The simulator's EFA part end to end: the efa_counters group on a running simulated trn1.32xlarge reports every port's
traffic exactly once against the simulator's ground truth, joined to the Neuron devices (through the driver's BDF
answer, the class devices having no PCI parent), and sees an injected retransmit storm (det finding) and a link down;
the plain `neuron-monitor --simulate trn2.48xlarge --once` joins every port to its device. Conditions are waited for
with deadlines; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from neuron_monitor.groups.efa_counters import spec as K
from neuron_monitor.groups.efa_counters.collector import EfaCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.schema.read import Problems
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.conftest import daemon_cmd

DEADLINE = 120.0


def _wait(cond: Any, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def _efa_truth(sim: TemporarySimulator) -> dict[str, dict[str, int]]:
    truth: dict[str, dict[str, int]] = sim.truth.latest_totals()["efa"]
    return truth


def test_sim_efa_exactly_once_storm_and_link_down() -> None:
    # no neuron_pci_parent: the join comes from the driver's BDF answer, as with the driver as shipped
    with TemporarySimulator("trn1.32xlarge", runtimes=2, seed=5, sysfs_interval=0.2) as sim:
        group = EfaCounters(RootFS(sim.root))
        sim.command("pause")  # nothing moves while the baseline is taken
        time.sleep(1.5)  # the paused simulator's last file writes and totals
        group.prime()
        base = _efa_truth(sim)
        sim.command("resume")
        _wait(lambda: _efa_truth(sim)["rdmap3s0/1"]["tx_bytes"] > base["rdmap3s0/1"]["tx_bytes"], "traffic")
        sim.command("pause")
        time.sleep(1.5)
        summed: dict[str, dict[str, int]] = {}
        last: dict[str, Any] = {}

        def settled() -> bool:  # the files are written at the sysfs interval: read until they add up
            body = group.collect()
            last.update(body)
            for p in body["efa_ports"]:
                acc = summed.setdefault(f"{p['efa_device']}/{p['port']}", {})
                for name, count in p["counters"].items():
                    acc[name] = acc.get(name, 0) + count
            truth = _efa_truth(sim)
            return all(
                summed.get(port, {}).get(n, 0) == v - base[port][n] for port, c in truth.items() for n, v in c.items()
            )

        _wait(settled, "the reported counts to add up to the simulator's")
        assert "error" not in last
        ports = {p["efa_device"]: p for p in last["efa_ports"]}
        assert len(ports) == 8 and ports["rdmap3s0"]["neuron_device_indexes"] == [0, 1]
        assert summed["rdmap3s0/1"]["tx_bytes"] > 0  # the workload drove traffic
        # a retransmit storm on adapter 0 and a link down on adapter 1
        sim.command("resume")
        sim.command("efa_retrans_storm", adapter=0, share=0.1)
        sim.command("efa_link_down", adapter=1)

        def storm_seen() -> bool:
            value = K.read(group.collect(), "efa", Problems())
            kinds = {(rule.kind, key[0].split()[1]) for rule, key, amount, _ in K.findings(value) if amount > 0}
            return ("efa_retransmit_storm", "rdmap3s0") in kinds and ("efa_link_down", "rdmap11s0") in kinds

        _wait(storm_seen, "the storm and the link down")
        group.close()


def test_plain_simulate_joins_every_port() -> None:
    out = subprocess.run(
        daemon_cmd("--simulate", "trn2.48xlarge", "--once", "--no-imds"),
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout.strip().splitlines()[-1])
    ports = report["system_data"]["efa_counters"]["efa_ports"]
    assert len(ports) == 16
    assert sorted(i for p in ports for i in p["neuron_device_indexes"]) == list(range(16))
    assert all(len(p["neuron_device_indexes"]) == 1 for p in ports)
