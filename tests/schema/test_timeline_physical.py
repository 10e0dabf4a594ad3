"""Per-physical-core utilization reaches the timeline on trn2 (``v3d``) and trn3 (``v4d``) reports: the snapshot
carries it and the trace has one ``physical utilization`` counter per logical core, a value per physical core."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from neuron_monitor.groups.neuroncore_counters import body as NCB
from neuron_monitor.schema import names as N
from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.extract import parse_snapshot
from neuron_monitor.timeline.selection import COUNTER_TYPES, Selection
from tests.schema.conftest import simulated_report
from tests.timeline import tef
from tests.timeline.factory import record


@pytest.mark.parametrize(("shape", "key"), [("trn2.48xlarge", "v3d"), ("trn3.48xlarge", "v4d")])
def test_snapshot_and_trace_carry_physical_cores(shape: str, key: str, tmp_path: Path) -> None:
    first = simulated_report(shape)
    snap = parse_snapshot(first, first[N.REPORT_TIME], "x")
    per_device = first[N.NEURON_HARDWARE_INFO][N.NEURONCORE_PER_DEVICE_COUNT]
    assert per_device > 0
    expected: dict[int, dict[str, float]] = {}
    for rt in first[N.NEURON_RUNTIME_DATA]:
        for core, data in rt["report"][N.NEURONCORE_COUNTERS][NCB.NEURONCORES_IN_USE].items():
            phys = expected.setdefault(int(core), {})
            for name, pdata in data[key].items():
                phys[name] = phys.get(name, 0.0) + pdata[NCB.NEURONCORE_UTILIZATION]
    got: dict[int, dict[str, float]] = {}
    for runtime in snap.runtimes:
        for part in runtime.groups:
            for track, where, phys in part.samples:
                if track.category != "neuroncore_physical_utilization":
                    continue
                for name, value in phys.items():
                    got.setdefault(int(where[0]), {})[name] = got.get(int(where[0]), {}).get(name, 0.0) + value
    assert got == expected and len(got) >= 64

    second = copy.deepcopy(first)
    second[N.REPORT_TIME] = first[N.REPORT_TIME] + 1.0
    rec = record(tmp_path / "r.gz", [first, second])
    out = tmp_path / "t.json"
    run([str(rec)], Selection(), Detector(Selection()), str(out))
    counters = tef.counters(tef.check_trace(out))
    tracks = {name: samples for name, samples in counters.items() if name.endswith("physical utilization")}
    assert len(tracks) == len(expected)
    for samples in tracks.values():
        assert len(samples[0][1]) == 2  # two physical cores per logical core (LNC=2)


def test_the_physical_track_is_a_selectable_event_type() -> None:
    assert "neuroncore_physical_utilization" in COUNTER_TYPES
