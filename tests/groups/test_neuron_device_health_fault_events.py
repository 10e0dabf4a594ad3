"""Fault events counted exactly once: counter growth, resets, transitions, drains, and across a saved state."""

from __future__ import annotations

import json

import pytest

from neuron_monitor.groups.neuron_device_health.fault_events import FaultLedger
from neuron_monitor.groups.neuron_device_health.rules import DeviceSignals as Sig


def sig(index: int = 0, **kw: object) -> Sig:
    base: dict[str, object] = dict(
        unhealthy_components=(), hw_error_events=0, mem_ecc_uncorrected=0, sram_ecc_uncorrected=0, mem_ecc_repairable=0
    )
    base.update(kw)
    return Sig(index, **base)  # type: ignore[arg-type]


def test_baseline_counts_nothing_then_growth_once() -> None:
    ledger = FaultLedger()
    assert not ledger.observe(sig(mem_ecc_uncorrected=5, hw_error_events=2), 1.0)
    assert ledger.drain() == {}
    assert ledger.observe(sig(mem_ecc_uncorrected=7, sram_ecc_uncorrected=1, hw_error_events=2), 2.0)
    assert not ledger.observe(sig(mem_ecc_uncorrected=7, sram_ecc_uncorrected=1, hw_error_events=2), 3.0)
    assert ledger.drain() == {(0, "ecc_uncorrected"): (3, 2.0)}
    assert ledger.drain() == {}  # drained once
    assert ledger.totals[(0, "ecc_uncorrected")].count == 3


def test_reset_counts_the_new_value() -> None:
    ledger = FaultLedger()
    ledger.observe(sig(mem_ecc_repairable=5), 1.0)
    ledger.observe(sig(mem_ecc_repairable=2), 2.0)  # driver reloaded, then 2 new
    assert ledger.drain() == {(0, "ecc_repairable"): (2, 2.0)}


def test_components_and_device_lost_are_transitions() -> None:
    ledger = FaultLedger()
    ledger.observe(sig(), 1.0)
    ledger.observe(sig(unhealthy_components=("hbm",)), 2.0)
    ledger.observe(sig(unhealthy_components=("hbm", "sram")), 3.0)
    ledger.observe(sig(unhealthy_components=("hbm", "sram")), 4.0)
    ledger.observe(sig(unhealthy_components=()), 5.0)
    ledger.observe(sig(unhealthy_components=("hbm",)), 6.0)  # again: a new event
    ledger.observe(Sig(0, present=False), 7.0)
    ledger.observe(Sig(0, present=False), 8.0)
    assert ledger.drain() == {(0, "health_component"): (3, 2.0), (0, "device_lost"): (1, 7.0)}


def test_an_unreadable_counter_counts_nothing_twice() -> None:
    """The first good read after an unreadable one is a new baseline (util/counters.py), then growth counts."""
    ledger = FaultLedger()
    ledger.observe(sig(hw_error_events=3), 1.0)
    ledger.observe(sig(hw_error_events=None), 2.0)
    ledger.observe(sig(hw_error_events=4), 3.0)
    assert ledger.drain() == {}
    ledger.observe(sig(hw_error_events=6), 4.0)
    assert ledger.drain() == {(0, "hw_error"): (2, 4.0)}


def test_count_existing_on_first_run_with_a_state() -> None:
    ledger = FaultLedger(count_existing=True)
    ledger.observe(sig(mem_ecc_uncorrected=2, unhealthy_components=("hbm",)), 1.0)
    ledger.observe(Sig(1, present=False, expected=True), 1.0)
    assert ledger.drain() == {
        (0, "ecc_uncorrected"): (2, 1.0),
        (0, "health_component"): (1, 1.0),
        (1, "device_lost"): (1, 1.0),
    }


@pytest.mark.parametrize("same_boot", [True, False])
def test_restart_counts_only_what_grew_while_down(same_boot: bool) -> None:
    ledger = FaultLedger()
    ledger.observe(sig(mem_ecc_uncorrected=1), 1.0)
    ledger.observe(sig(mem_ecc_uncorrected=2), 2.0)
    ledger.drain()
    state = json.loads(json.dumps(ledger.to_state("boot-a")))
    again = FaultLedger.from_state(state, "boot-a" if same_boot else "boot-b")
    assert again.totals[(0, "ecc_uncorrected")].count == 1
    again.observe(sig(mem_ecc_uncorrected=4 if same_boot else 3), 10.0)
    # same boot: 2 -> 4 grew by 2 while down; after a reboot the driver counted 3 from zero
    assert again.drain() == {(0, "ecc_uncorrected"): (2 if same_boot else 3, 10.0)}


def test_pending_events_survive_a_restart() -> None:
    ledger = FaultLedger()
    ledger.observe(sig(), 1.0)
    ledger.observe(sig(hw_error_events=1), 2.0)
    again = FaultLedger.from_state(ledger.to_state("b"), "b")
    assert again.drain() == {(0, "hw_error"): (1, 2.0)}


@pytest.mark.parametrize(
    "state",
    [None, [], {"version": 99}, {"version": 1, "totals": {"x/ecc_uncorrected": [1, 1, 1]}},
     {"version": 1, "totals": {"0/bogus": [1, 1, 1]}}, {"version": 1, "raw": {"0": [1]}, "boot_id": "b"},
     {"version": 1, "totals": {"99999/hw_error": [1, 1, 1]}},
     {"version": 2, "totals": {"0/hw_error": [-3, 1, 1]}}, {"version": 2, "totals": {"0/hw_error": [2**64, 1, 1]}},
     {"version": 2, "totals": {"0/hw_error": [1.5, 1, 1]}}, {"version": 2, "totals": {"0/hw_error": [True, 1, 1]}},
     {"version": 2, "totals": {"0/hw_error": [1, float("nan"), 1]}},
     {"version": 2, "pending": {"0/hw_error": [1, float("inf")]}},
     {"version": 2, "pending": {"0/hw_error": [0, 1]}},
     {"version": 2, "raw": {"0": [0, 70000, 0, 0]}, "boot_id": "b"},
     {"version": 2, "raw": {"0": [0, 0, 0, -1]}, "boot_id": "b"},
     {"version": 2, "raw": {"0": [0, 0, 0]}, "boot_id": "b"},
     {"version": 2, "present": {"0": "yes"}, "boot_id": "b"}],
)  # fmt: skip
def test_a_bad_state_is_refused(state: object) -> None:
    with pytest.raises(ValueError):
        FaultLedger.from_state(state, "b")


def test_a_version_1_state_carries_its_totals_and_the_counts_it_can() -> None:
    """An upgrade keeps the ledger: version 1 kept the uncorrected counts as one sum, which cannot be split (their
    next read is a baseline); the repairable and hw_error baselines, the totals and the pending events carry on."""
    old = {"version": 1, "boot_id": "b", "raw": {"0": [5, 2, 3]}, "present": {"0": True},
           "totals": {"0/ecc_uncorrected": [5, 1.0, 2.0]}, "pending": {"0/hw_error": [1, 2.0]}}  # fmt: skip
    ledger = FaultLedger.from_state(old, "b")
    assert ledger.totals[(0, "ecc_uncorrected")].count == 5
    ledger.observe(sig(mem_ecc_uncorrected=4, sram_ecc_uncorrected=1, mem_ecc_repairable=2, hw_error_events=4), 3.0)
    assert ledger.drain() == {(0, "hw_error"): (2, 2.0)}  # the pending one and one new
    ledger.observe(sig(mem_ecc_uncorrected=6, sram_ecc_uncorrected=1, mem_ecc_repairable=2, hw_error_events=4), 4.0)
    assert ledger.drain() == {(0, "ecc_uncorrected"): (2, 4.0)}
