"""One rule for every cumulative counter (util/counters.py, docs/neuron-data.md "Cumulative counters"): a drop is a
reset unless a wrap is proven, the first good read after a bad one is a baseline, a step past what the source can
make is the group's error, and a value near 2^64 is never a baseline. The issue's examples, per group, and the
Prometheus alert that must not fire after a device reset (promtool)."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.groups.efa_counters.collector import EFA_COUNTER, EfaCounters
from neuron_monitor.groups.neuron_device_health.fault_events import FaultLedger
from neuron_monitor.groups.neuron_device_health.rules import DeviceSignals
from neuron_monitor.groups.neuron_device_telemetry.collector import NeuronDeviceTelemetry
from neuron_monitor.groups.neuron_hw_counters.collector import NeuronHwCounters
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.plausible import CORE_STATUS, ECC_FIELD, ECC_SUM, HW_ERROR_EVENTS
from neuron_monitor.sim.shapes import get_shape
from neuron_monitor.sim.tree import DeviceTree, write_host_files
from neuron_monitor.util.counters import HALF_U64, U64_TOP, Source, step, steps
from tests.groups.efa_tree import add_adapter, port_files, set_counter, switch

REPO = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

SOURCES = [ECC_FIELD, ECC_SUM, CORE_STATUS, HW_ERROR_EVENTS, EFA_COUNTER, Source(rate=1e16, top=U64_TOP, width=64)]
_VALUE = st.one_of(st.none(), st.integers(0, U64_TOP), st.integers(0, 70000), st.integers(U64_TOP - 1000, U64_TOP))


# -- the rule itself ---------------------------------------------------------------------------------------------
@settings(max_examples=400, deadline=None)
@given(src=st.sampled_from(SOURCES), prev=_VALUE, cur=_VALUE, dt=st.floats(0, 3600))
def test_a_step_never_counts_more_than_the_source_can_make(
    src: Source, prev: int | None, cur: int | None, dt: float
) -> None:
    if prev is not None and prev > src.top:
        prev = None  # never a baseline (rule 2)
    count, baseline, problem = step(prev, cur, dt, src)
    if count is not None:
        assert 0 <= count <= src.bound(dt) and problem is None
    if cur is None or prev is None:
        assert count is None  # unread, or a baseline: nothing counted
    if baseline is not None:
        assert baseline == cur and baseline <= src.top
    if problem is not None:
        assert count is None and baseline is None  # refused: the next good read is a baseline


@settings(max_examples=200, deadline=None)
@given(
    src=st.sampled_from(SOURCES),
    pairs=st.lists(st.tuples(_VALUE, _VALUE), max_size=12),
    dt=st.floats(0, 100),
)
def test_many_steps_at_once_are_each_step(src: Source, pairs: list[tuple[Any, Any]], dt: float) -> None:
    """`steps` (one ``map(sub)`` in the usual case) gives what `step` gives counter by counter."""
    prev = [p if p is None or p <= src.top else None for p, _ in pairs]
    cur = [c for _, c in pairs]
    counts, baselines, bad = steps(prev, cur, dt, src)
    one = [step(p, c, dt, src) for p, c in zip(prev, cur, strict=True)]
    assert counts == [o[0] for o in one]
    assert baselines == [o[1] for o in one]
    assert bad == [(i, o[2]) for i, o in enumerate(one) if o[2] is not None]


def test_the_rule_on_the_issue_examples() -> None:
    assert step(3, 0, 5.0, ECC_FIELD)[0] is None  # ECC 3 then 0: a reset (or a failed firmware read), not 65,533
    assert step(2, 0, 5.0, ECC_SUM)[0] is None
    assert step(3, 1, 5.0, ECC_SUM)[:2] == (1, 1)  # a reset that counted one since
    assert step(65534, 2, 5.0, ECC_FIELD)[:2] == (4, 2)  # a proven wrap: from the field's top sixteenth
    assert step(40000, 2, 5.0, ECC_FIELD)[:2] == (2, 2)  # not from near the top: a reset
    assert step(10**9, 2**64 - 5, 0.5, EFA_COUNTER)[2] is not None  # a jump to near 2^64: refused
    assert step(None, 2**64 - 1, 0.5, EFA_COUNTER) == (None, None, f"holds {2**64 - 1}, past what it can ({HALF_U64})")
    wrap64 = Source(rate=1e16, burst=1e16, top=U64_TOP, width=64)  # the data block's MAC count
    assert step(U64_TOP - 9, 10, 1.0, wrap64)[0] == 20
    assert step(None, U64_TOP, 1.0, CORE_STATUS)[1:] == (None, f"holds {U64_TOP}, past what it can ({HALF_U64})")
    assert math.isfinite(EFA_COUNTER.bound(0.5))


# -- per group ---------------------------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path: Path) -> Any:
    shape = get_shape("trn1.32xlarge")
    write_host_files(tmp_path, shape, "2.30.2.0", shape.lnc)
    devs = [DeviceTree(tmp_path, shape, i, "2.30.2.0") for i in range(shape.devices)]
    yield tmp_path, devs
    for d in devs:
        d.close()


def test_hw_counters_a_device_reset_is_no_ecc_error(tree: Any) -> None:
    """ECC 3 then 0 (a device reset, or a firmware read the driver could not make) was 65,533 uncorrected errors."""
    root, devs = tree
    g = NeuronHwCounters(RootFS(root))
    devs[2].ecc["mem_ecc_uncorrected"].write(b"3\n")
    devs[2].ecc["sram_ecc_uncorrected"].write(b"3\n")
    g.prime()
    devs[2].ecc["mem_ecc_uncorrected"].write(b"0\n")
    devs[2].ecc["sram_ecc_uncorrected"].write(b"0\n")
    bodies = [g.collect() for _ in range(3)]
    devs[2].ecc["sram_ecc_uncorrected"].write(b"1\n")  # one new error after the reset
    bodies.append(g.collect())
    unc = [
        (b["neuron_devices"][2]["mem_ecc_uncorrected"], b["neuron_devices"][2]["sram_ecc_uncorrected"]) for b in bodies
    ]
    assert unc == [(0, 0), (0, 0), (0, 0), (0, 1)]
    assert all("error" not in b for b in bodies)


def test_telemetry_a_device_reset_is_no_repairable_ecc_event(tree: Any) -> None:
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    devs[1].ecc["mem_ecc_repairable_uncorrected"].write(b"2\n")
    g.prime()
    devs[1].ecc["mem_ecc_repairable_uncorrected"].write(b"0\n")
    counts = [g.collect()["neuron_devices"][1].get("ecc", {}).get("mem_ecc_repairable_uncorrected") for _ in range(2)]
    assert all(c in (None, 0) for c in counts)  # was 65,534


def test_telemetry_a_core_counter_near_two_to_the_64_is_no_baseline(tree: Any) -> None:
    """A core counter of 2^64-1 at start made the next good value count whole (+360 for a true +10)."""
    root, devs = tree
    g = NeuronDeviceTelemetry(RootFS(root))
    status = devs[0].core_files[0]["status/success"]
    status.write(b"18446744073709551615\n")
    g.prime()
    status.write(b"360\n")
    first = g.collect()["neuron_devices"][0]["neuroncores"]["0"]["execution_status"].get("success")
    status.write(b"370\n")
    second = g.collect()["neuron_devices"][0]["neuroncores"]["0"]["execution_status"]["success"]
    assert first in (None, 0) and second == 10


def _efa(tmp_path: Path) -> Path:
    port = add_adapter(tmp_path, "rdmap0s6", switch(0, 1), port_files())
    return port


def test_efa_a_first_bad_read_is_not_a_zero_baseline(tmp_path: Path) -> None:
    """A counter unreadable at start counted its whole value at the next good read (828 MB in 0.5 s)."""
    port = _efa(tmp_path)
    set_counter(port, "rx_bytes", b"garbage\n")
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    set_counter(port, "rx_bytes", 828_000_000)
    first = g.collect()["efa_ports"][0]["counters"].get("rx_bytes")
    set_counter(port, "rx_bytes", 828_000_500)
    second = g.collect()["efa_ports"][0]["counters"]["rx_bytes"]
    assert first in (None, 0) and second == 500


def test_efa_a_jump_to_near_two_to_the_64_is_an_error(tmp_path: Path) -> None:
    port = _efa(tmp_path)
    set_counter(port, "rx_bytes", 1000)
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    set_counter(port, "rx_bytes", 2**64 - 16)
    body = g.collect()
    assert "rx_bytes of rdmap0s6 port 1" in body["error"]
    assert "rx_bytes" not in body["efa_ports"][0]["counters"]  # was 1.8e19 in one period
    set_counter(port, "rx_bytes", 2000)
    assert g.collect()["efa_ports"][0]["counters"].get("rx_bytes") in (None, 0)  # a new baseline
    set_counter(port, "rx_bytes", 2500)
    assert g.collect()["efa_ports"][0]["counters"]["rx_bytes"] == 500


def test_efa_an_adapter_whose_device_link_loops_or_escapes_is_named(tmp_path: Path) -> None:
    """Such adapters were left out with an empty ``error``."""
    _efa(tmp_path)
    ib = tmp_path / "sys/class/infiniband"
    (tmp_path / "sys/devices/virtual/infiniband/rdmap1s7").mkdir(parents=True)
    (ib / "rdmap1s7").symlink_to("../../devices/virtual/infiniband/rdmap1s7")
    loop = tmp_path / "sys/devices/virtual/infiniband/rdmap1s7/device"
    loop.symlink_to("device")  # loops
    (tmp_path / "sys/devices/virtual/infiniband/rdmap2s8").mkdir(parents=True)
    (ib / "rdmap2s8").symlink_to("../../devices/virtual/infiniband/rdmap2s8")
    (tmp_path / "sys/devices/virtual/infiniband/rdmap2s8/device").symlink_to("../../../../../../../../etc")
    g = EfaCounters(RootFS(tmp_path))
    g.prime()
    body = g.collect()
    assert [p["efa_device"] for p in body["efa_ports"]] == ["rdmap0s6"]
    assert "rdmap1s7: its device link cannot be followed" in body["error"]
    assert "rdmap2s8: its device link points outside sys/devices" in body["error"]


def test_health_a_fault_count_near_two_to_the_64_is_refused() -> None:
    ledger = FaultLedger()
    sig = dict(unhealthy_components=(), mem_ecc_uncorrected=0, sram_ecc_uncorrected=0, mem_ecc_repairable=0)
    ledger.observe(DeviceSignals(0, hw_error_events=2, **sig), 1.0)  # type: ignore[arg-type]
    ledger.observe(DeviceSignals(0, hw_error_events=2**64 - 1, **sig), 2.0)  # type: ignore[arg-type]
    ledger.observe(DeviceSignals(0, hw_error_events=5, **sig), 3.0)  # type: ignore[arg-type]
    ledger.observe(DeviceSignals(0, hw_error_events=7, **sig), 4.0)  # type: ignore[arg-type]
    assert ledger.take_problems()
    assert ledger.totals[(0, "hw_error")].count == 2  # was 1.8e19


# -- the alert ----------------------------------------------------------------------------------------------------
def _exporter_series(values: list[int]) -> list[float]:
    """``hardware_ecc_events_total`` as the exporter serves it: the running sum of the per-period counts."""
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool (Debian package prometheus) missing")
def test_the_uncorrected_ecc_alert_does_not_fire_after_a_device_reset(tree: Any, tmp_path: Path) -> None:
    """ECC counts of 3 going to 0 (the maintenance that fixed the device) through the real group, summed as the
    exporter does, then promtool: NeuronDeviceUncorrectedEcc must stay silent (it fired for an hour)."""
    root, devs = tree
    g = NeuronHwCounters(RootFS(root))
    devs[3].ecc["mem_ecc_uncorrected"].write(b"3\n")
    g.prime()
    counts = [g.collect()["neuron_devices"][3]["mem_ecc_uncorrected"] for _ in range(5)]
    devs[3].ecc["mem_ecc_uncorrected"].write(b"0\n")  # the device reset
    counts += [g.collect()["neuron_devices"][3]["mem_ecc_uncorrected"] for _ in range(30)]
    assert _promtool_silent(tmp_path, " ".join(f"{v:g}" for v in _exporter_series(counts)))
    # the same check on what the old 16-bit wrap reading served (3 -> 0 as 65,533 errors) fails: it is not vacuous
    assert not _promtool_silent(tmp_path, " ".join(f"{v:g}" for v in _exporter_series([0] * 5 + [65533] + [0] * 29)))


def _promtool_silent(tmp_path: Path, series: str) -> bool:
    """True when promtool finds NeuronDeviceUncorrectedEcc silent at 10 and 30 minutes on ``series``."""
    labels = 'job="neuron-monitor",instance="n1:8000",neuron_device_index="3",event_type="mem_ecc_uncorrected"'
    test = tmp_path / "reset.yml"
    test.write_text(
        f"""rule_files:
  - {REPO / "deploy/prometheus/neuron-monitor.rules.yml"}
evaluation_interval: 1m
group_eval_order: [neuron-monitor.rules, neuron-monitor.alerts]
tests:
  - interval: 1m
    input_series:
      - series: 'hardware_ecc_events_total{{{labels}}}'
        values: '{series}'
    alert_rule_test:
      - {{eval_time: 10m, alertname: NeuronDeviceUncorrectedEcc, exp_alerts: []}}
      - {{eval_time: 30m, alertname: NeuronDeviceUncorrectedEcc, exp_alerts: []}}
"""
    )
    out = subprocess.run([PROMTOOL, "test", "rules", str(test)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        assert "NeuronDeviceUncorrectedEcc" in out.stdout + out.stderr, out.stdout + out.stderr
    return out.returncode == 0


def test_det_takes_no_ecc_finding_from_a_count_no_device_makes() -> None:
    """A producer's 1.8e19 uncorrected events in one period (the old wrap reading) is no det finding; 2 is."""
    from neuron_monitor.groups.neuron_hw_counters.spec import DeviceCounters, NeuronHwCounters, findings

    absurd = NeuronHwCounters([DeviceCounters("0", 0, {"mem_ecc_uncorrected": 1.8e19, "sram_ecc_uncorrected": 0})])
    assert list(findings(absurd)) == []
    real = NeuronHwCounters([DeviceCounters("0", 0, {"mem_ecc_uncorrected": 2, "sram_ecc_uncorrected": 0})])
    assert [f[2] for f in findings(real)] == [2]
