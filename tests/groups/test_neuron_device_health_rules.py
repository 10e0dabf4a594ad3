"""The health rule table, row by row: signals -> findings -> verdict; the node's verdict; `track`'s ``since``."""

from __future__ import annotations

import pytest

from neuron_monitor.groups.neuron_device_health import rules as H
from neuron_monitor.groups.neuron_device_health.rules import DeviceSignals as Sig

HEALTHY_TRN2 = Sig(
    0,
    unhealthy_components=(),
    hw_error_events=0,
    mem_ecc_uncorrected=0,
    sram_ecc_uncorrected=0,
    mem_ecc_repairable=0,
    power_status="VALID",
)


def _with(**changes: object) -> Sig:
    fields = {name: getattr(HEALTHY_TRN2, name) for name in Sig.__slots__}
    fields.update(changes)
    return Sig(**fields)  # type: ignore[arg-type]


# (case, signals, expected state, expected (rule, detail) findings)
TABLE: list[tuple[str, Sig, str, list[tuple[str, str]]]] = [
    ("all quiet on a trn2", HEALTHY_TRN2, "healthy", []),
    ("trn1 driver without health_status", Sig(0, mem_ecc_uncorrected=0, sram_ecc_uncorrected=0), "healthy", []),
    ("inf1: no hardware files at all", Sig(0), "healthy", []),
    ("HBM uncorrected ECC", _with(mem_ecc_uncorrected=2), "unhealthy", [("ecc_uncorrected", "hbm")]),
    ("SRAM uncorrected ECC", _with(sram_ecc_uncorrected=1), "unhealthy", [("ecc_uncorrected", "sram")]),
    (
        "both memories",
        _with(mem_ecc_uncorrected=1, sram_ecc_uncorrected=3),
        "unhealthy",
        [("ecc_uncorrected", "hbm"), ("ecc_uncorrected", "sram")],
    ),
    ("unhealthy component", _with(unhealthy_components=("hbm",)), "unhealthy", [("unhealthy_component", "hbm")]),
    (
        "two components",
        _with(unhealthy_components=("link_efa", "sram")),
        "unhealthy",
        [("unhealthy_component", "link_efa"), ("unhealthy_component", "sram")],
    ),
    ("hardware error events", _with(hw_error_events=1), "unhealthy", [("hw_error_event", "")]),
    ("device lost", Sig(3, present=False, expected=True), "unhealthy", [("device_lost", "")]),
    ("absent and never expected", Sig(3, present=False, expected=False), "healthy", []),
    ("repair pending stays healthy", _with(mem_ecc_repairable=4), "healthy", [("repair_pending", "hbm")]),
    (
        "firmware unreachable",
        _with(unhealthy_components=("device_unreachable",)),
        "unknown",
        [("device_unreachable", "")],
    ),
    ("power NO_DATA", _with(power_status="NO_DATA"), "unknown", [("power_status", "NO_DATA")]),
    ("power INVALID", _with(power_status="INVALID"), "unknown", [("power_status", "INVALID")]),
    (
        "a health file unreadable",
        _with(unreadable=("hw_error_event",)),
        "unknown",
        [("signal_unreadable", "hw_error_event")],
    ),
    (
        "an expected signal not found",
        _with(unhealthy_components=None, missing=(("health_status/unhealthy_components", ""),)),
        "unknown",
        [("signal_missing", "health_status/unhealthy_components")],
    ),
    (
        "an expected signal with two candidates",
        _with(
            mem_ecc_uncorrected=None,
            missing=(("hardware/mem_ecc_uncorrected", "2 candidates (a/hardware/x, b/hardware/x), none used"),),
        ),
        "unknown",
        [("signal_missing", "hardware/mem_ecc_uncorrected")],
    ),
    (
        "unhealthy outranks unknown and warning",
        _with(mem_ecc_uncorrected=1, mem_ecc_repairable=1, power_status="NO_DATA"),
        "unhealthy",
        [("ecc_uncorrected", "hbm"), ("repair_pending", "hbm"), ("power_status", "NO_DATA")],
    ),
    (
        "unknown outranks warning",
        _with(mem_ecc_repairable=1, power_status="INVALID"),
        "unknown",
        [("repair_pending", "hbm"), ("power_status", "INVALID")],
    ),
]


@pytest.mark.parametrize(("case", "signals", "state", "findings"), TABLE, ids=[row[0] for row in TABLE])
def test_rule_table(case: str, signals: Sig, state: str, findings: list[tuple[str, str]]) -> None:
    got = H.evaluate(signals)
    assert [f.key for f in got] == findings
    assert H.device_state(got) == state
    for f in got:
        assert f.message and len(f.message) < 80  # fits an NPD condition message
        assert f.severity == next(r.severity for r in H.RULES if r.id == f.rule)


def test_every_rule_is_reachable_by_the_table() -> None:
    fired = {f.rule for _, s, _, _ in TABLE for f in H.evaluate(s)}
    assert fired == {r.id for r in H.RULES}


@pytest.mark.parametrize(
    ("states", "node"),
    [
        ([], "unknown"),
        (["healthy"] * 16, "healthy"),
        (["healthy", "unknown"], "unknown"),
        (["unknown", "unhealthy", "healthy"], "unhealthy"),
    ],
)
def test_node_state(states: list[str], node: str) -> None:
    assert H.node_state(states) == node


def test_track_keeps_since_while_state_and_findings_last() -> None:
    v1 = H.track(None, [], 100.0)
    assert (v1.state, v1.since) == ("healthy", 100.0)
    v2 = H.track(v1, H.evaluate(_with(unhealthy_components=("hbm",))), 105.0)
    assert (v2.state, v2.since, v2.findings[0].since) == ("unhealthy", 105.0, 105.0)
    v3 = H.track(v2, H.evaluate(_with(unhealthy_components=("hbm", "sram"))), 110.0)
    assert v3.since == 105.0 and [f.since for f in v3.findings] == [105.0, 110.0]
    v4 = H.track(v3, [], 120.0)
    assert (v4.state, v4.since, v4.findings) == ("healthy", 120.0, ())


def test_expected_devices() -> None:
    assert H.expected_devices("trn2.48xlarge") == 16
    assert H.expected_devices("inf2.24xlarge") == 6
    assert H.expected_devices("m5.large") is None


@pytest.mark.parametrize(
    ("name", "driver", "expected"),
    [
        ("Trainium2", (2, 30, 2, 0), {"hardware/mem_ecc_uncorrected", "health_status/unhealthy_components"}),
        ("Trainium2", (2, 31, 7, 0), {"hardware/mem_ecc_uncorrected", "health_status/unhealthy_components"}),
        ("Trainium1", (2, 30, 2, 0), {"hardware/mem_ecc_uncorrected", "power/utilization"}),
        ("Inferentia2", None, {"hardware/sram_ecc_uncorrected"}),
        ("", (2, 31, 7, 0), {"hardware/mem_ecc_uncorrected", "power/utilization"}),
    ],
)
def test_expected_signals_from_driver_2_30_2(name: str, driver: tuple[int, ...] | None, expected: set[str]) -> None:
    got = set(H.expected_signals(name, driver))
    assert expected <= got
    if name != "Trainium2":
        assert "health_status/unhealthy_components" not in got  # health_status: Trn2 and Trn3 only


@pytest.mark.parametrize(
    ("name", "driver"), [("Inferentia", (2, 24, 7, 0)), ("Trainium2", (2, 29, 0, 0)), ("Trainium1", (2, 24, 7, 0))]
)
def test_older_drivers_and_inf1_expect_nothing(name: str, driver: tuple[int, ...]) -> None:
    assert H.expected_signals(name, driver) == ()
