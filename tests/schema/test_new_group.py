"""A group added as nothing but a folder with its spec reaches every consumer: the folder is dropped into the
groups package (a temporary directory added to its path), and the Prometheus exporter, the CloudWatch mapping and
its EMF lines, the timeline, neuron-monitor-det (a det rule), neuron-monitor-top --once (a device column) and the
spec registry (whence the daemon's group list) all pick it up without any other change."""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_monitor import groups as group_package
from neuron_monitor.exporters.cloudwatch.emf import encode_events
from neuron_monitor.exporters.cloudwatch.mapping import ReportMapper
from neuron_monitor.schema import read as read_module
from neuron_monitor.schema import spec as spec_module
from neuron_monitor.timeline import det_cli
from neuron_monitor.timeline.convert import run
from neuron_monitor.timeline.detect import Detector
from neuron_monitor.timeline.selection import Selection
from neuron_monitor.top import cli as top_cli
from tests.exporters.prometheus.prom_helpers import feed, one, parse, scrape
from tests.schema.conftest import aws_reports
from tests.timeline import tef
from tests.timeline.factory import record

SPEC_SOURCE = '''
"""``fan_speed`` (system): a test group, fan speeds in RPM and the turns of the period."""
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems, numbers


@dataclass(slots=True)
class FanSpeed:
    rpm: dict[str, float]
    turns: dict[str, float]


def read(body: dict[str, Any], where: str, problems: Problems) -> FanSpeed:
    return FanSpeed(numbers(body.get("rpm"), problems, where, "rpm") or {},
                    numbers(body.get("turns"), problems, where, "turns", counted=True) or {})


RPM = S.PromFamily("fan_speed_rpm", S.GAUGE, "Fan speed", S.INSTANCE_SCOPE, ("fan",))
TURNS = S.PromFamily("fan_turns", S.COUNTER, "Fan turns", S.INSTANCE_SCOPE, ("fan",))
CW_RPM = S.CwMetric("FanSpeed", "None", S.HOST_DIMS, keyed=True)
TRACK = S.Track("fan rpm", "fan_speed", "rpm", S.HOST_TRACK)
STALLED = S.DetRule("fan_stalled", S.HOST_TRACK, S.WARNING, "a fan stopped turning", episode=S.STATE_EPISODES)
COLUMN = S.TopColumn(S.TOP_DEVICES, "fan", 7, order=90)  # fan N cools Neuron device N


def gauges(v: FanSpeed) -> Iterator[S.PromSample]:
    yield S.PromSample(RPM, prefix=(), values=v.rpm, divisor=1.0, suffix=())


def counts(v: FanSpeed, period: float) -> Iterator[S.PromCount]:
    yield S.PromCount(TURNS, prefix=(), values=v.turns, factor=1.0)


def datums(v: FanSpeed, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for fan, rpm in v.rpm.items():
        yield CW_RPM, (), fan, rpm


def timeline(v: FanSpeed) -> Iterator[S.TimelineSample]:
    yield TRACK, (), v.rpm


def findings(v: FanSpeed) -> Iterator[S.DetFinding]:
    for fan, rpm in v.rpm.items():
        yield STALLED, (f"fan{fan}",), 1.0 if rpm == 0 else 0.0, {}


def top(v: FanSpeed, period: float | None) -> Iterator[S.TopCell]:
    for fan, rpm in v.rpm.items():
        yield COLUMN, (fan,), f"{rpm:.0f}", "bold red" if rpm == 0 else ""


SPEC = S.GroupSpec(name="fan_speed", placement=S.SYSTEM, read=read, doc=__doc__ or "",
                   prometheus=(RPM, TURNS), gauges=gauges, counts=counts, cloudwatch=(CW_RPM,), datums=datums,
                   tracks=(TRACK,), timeline=timeline, det_rules=(STALLED,), findings=findings,
                   top_columns=(COLUMN,), top=top)
'''


def _reset() -> None:
    spec_module.registry.cache_clear()
    spec_module._counter_families.cache_clear()
    read_module._registry = None


@pytest.fixture
def fan_spec(tmp_path: Path) -> Iterator[None]:
    folder = tmp_path / "groups"
    (folder / "fan_speed").mkdir(parents=True)
    (folder / "fan_speed" / "__init__.py").write_text("")
    (folder / "fan_speed" / "spec.py").write_text(SPEC_SOURCE)
    group_package.__path__.append(str(folder))
    _reset()
    try:
        yield
    finally:
        group_package.__path__.remove(str(folder))
        sys.modules.pop("neuron_monitor.groups.fan_speed.spec", None)
        sys.modules.pop("neuron_monitor.groups.fan_speed", None)
        _reset()


def _report(turns: int, time: float, rpm1: float = 900) -> dict[str, Any]:
    report = copy.deepcopy(aws_reports()[-1])
    report["report_time"] = time
    report["system_data"]["fan_speed"] = {
        "period": 1.0,
        "rpm": {"0": 1200.0, "1": rpm1},
        "turns": {"0": turns},
        "error": "",
        "fresh": True,
    }
    return report


def test_a_spec_module_alone_brings_a_group_to_every_consumer(fan_spec: None, tmp_path: Path) -> None:
    assert "fan_speed" in spec_module.registry().system

    series = parse(scrape(feed([_report(10, 1000.0), _report(5, 1001.0)])))
    assert one(series, "fan_speed_rpm", fan="1") == 900.0
    assert one(series, "fan_turns_total", fan="0") == 15.0

    datums = ReportMapper().map(_report(10, 1000.0))
    values = {d.name: d.value for d in datums}
    assert values["FanSpeed0"] == 1200.0 and values["FanSpeed1"] == 900.0
    # the CloudWatch exporter's --output emf lines: the metric declared under the namespace with its unit
    events = [orjson.loads(line) for line in encode_events(datums, "neuron_monitor")]
    fan = next(e for e in events if "FanSpeed1" in e)
    assert fan["FanSpeed1"] == 900.0
    directive = fan["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "neuron_monitor"
    assert {"Name": "FanSpeed1", "Unit": "None"} in directive["Metrics"]

    rec = record(tmp_path / "r.gz", [_report(10, 1000.0), _report(5, 1001.0)])
    out = tmp_path / "t.json"
    run([str(rec)], Selection(), Detector(Selection()), str(out))
    counters = tef.counters(tef.check_trace(out))
    samples = next(v for k, v in counters.items() if k.endswith("/fan rpm"))
    assert samples[0][1] == {"0": 1200.0, "1": 900.0}


def test_a_spec_module_alone_brings_a_det_rule_and_a_top_column(
    fan_spec: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = [_report(10, 1000.0), _report(5, 1001.0, rpm1=0), _report(5, 1002.0, rpm1=0), _report(5, 1003.0)]
    rec = record(tmp_path / "r.gz", reports)
    trace = tmp_path / "det.json"
    assert det_cli.main([str(rec), "-o", str(trace)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("fan_stalled fan1 @ ") for line in lines), lines
    events = tef.check_trace(trace)
    assert any(e.get("ph") == "X" and e.get("name") == "fan_stalled" and e.get("cat") == "fan_stalled" for e in events)
    assert det_cli.main(["--rules"]) == 0
    assert any(line.startswith("fan_stalled ") for line in capsys.readouterr().out.splitlines())

    assert top_cli.main(["--once", "--replay", str(rec), "--width", "160"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.startswith("dev "))
    assert " fan " in f"{header} "
    assert re.search(r"^\s+0 \[.*\s1200(\s|$)", "\n".join(out), re.M), out  # fan 0 of device 0


def test_the_registry_is_back_to_the_daemons_groups_afterwards() -> None:
    assert "fan_speed" not in spec_module.registry().system
    assert orjson.dumps(sorted(spec_module.registry().system))
