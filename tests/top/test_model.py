"""The screen model and its text layout, from AWS's real reports and from hand-made report variants."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.schema.display import latency_text
from neuron_monitor.top.layout import Frame, core_ranges, human_bytes, plain, render
from neuron_monitor.top.model import Screen, screen_from_report
from tests.exporters.prometheus.prom_reports import trn2_report

REPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "reports"


def cwagent() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / "cwagent-test_trn1n32xl_report_line.json").read_text())
    return data


def wandb(n: int = 0) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / "wandb_trn1-2xl_reports.jsonl").read_text().splitlines()[n])
    return data


def text(report: dict[str, Any], width: int = 120, height: int | None = None, **frame: Any) -> str:
    screen = screen_from_report(report, frame.pop("tag_filter", None))
    return plain(render(Frame(screen=screen, **frame), width, height))


def test_trn1n_report_devices_cores_and_runtimes() -> None:
    report = cwagent()
    s = screen_from_report(report)
    assert (s.instance_type, s.device_count, s.cores_per_device) == ("trn1n.32xlarge", 16, 2)
    assert len(s.cores) == 32 and len(s.devices) == 16
    # core 6 is used by runtime "367" only; its utilization is the report's own figure
    raw = report["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["6"]
    core6 = s.cores[6]
    assert core6.utilization == pytest.approx(raw["neuroncore_utilization"])
    assert core6.device == 3 and "367" in core6.tags
    # device 3 holds cores 6 and 7: its utilization is their mean
    assert s.devices[3].utilization == pytest.approx((raw["neuroncore_utilization"] + 0.0) / 2)
    ecc = next(
        d for d in report["system_data"]["neuron_hw_counters"]["neuron_devices"] if d["neuron_device_index"] == 3
    )
    assert s.devices[3].cell("ecc") == str(sum(v for k, v in ecc.items() if k != "neuron_device_index"))
    # device memory by category: the sum of both runtimes' categories on the device's two cores
    expect: dict[str, int] = {}
    for rt in report["neuron_runtime_data"]:
        per_core = rt["report"]["memory_used"]["neuron_runtime_used_bytes"]["usage_breakdown"][
            "neuroncore_memory_usage"
        ]
        for core in ("6", "7"):
            for cat, v in per_core.get(core, {}).items():
                expect[cat] = expect.get(cat, 0) + v
    assert s.devices[3].memory == expect
    assert s.devices[3].memory_total is None  # this report predates neuron_device_memory_size
    tags = [r.tag for r in s.runtimes]
    assert tags == ["367", "123"]
    r367 = s.runtimes[0]
    assert r367.pid == 457402 and r367.cell("host") == human_bytes(9043968)
    period = report["neuron_runtime_data"][0]["report"]["execution_stats"]["period"]
    assert r367.cell("exec/s") == f"{2 / period:.1f}"
    assert r367.cell("errors") == "2" and r367.cell("p50") == "-"
    assert r367.cells[next(c for c in s.runtime_columns if c.header == "errors")][1] == "bold red"
    assert "nosuchfileordirectory" in r367.error
    assert any("neuron_runtime_vcpu_usage" in e for e in s.errors)


def test_trn1n_report_as_text() -> None:
    out = text(cwagent(), width=120, now=None)
    assert "trn1n.32xlarge" in out and "16 devices 32 NC" in out
    lines = out.splitlines()
    dev3 = next(line for line in lines if re.match(r"\s+3 \[", line))
    assert "20.7%" in dev3  # (41.4 + 0) / 2
    rt = next(line for line in lines if line.startswith("367 "))
    assert "457402" in rt and "8.6M" in rt  # host memory 9043968 bytes
    assert "errors in the newest report" in out
    assert "open/proc/457402/stat" in out


def test_trn1_report_latency_and_errors() -> None:
    s = screen_from_report(wandb(0))
    (r,) = s.runtimes
    stats = wandb(0)["neuron_runtime_data"][0]["report"]["execution_stats"]
    assert r.cell("p50") == latency_text(stats["latency_stats"]["total_latency"]["p50"])
    assert r.cell("p99") == latency_text(stats["latency_stats"]["total_latency"]["p99"])
    assert r.cell("errors") == str(sum(stats["error_summary"].values()))
    assert r.cell("exec/s") == f"{stats['execution_summary']['completed'] / stats['period']:.1f}"
    out = text(wandb(0), width=100)
    row = next(line for line in out.splitlines() if line.startswith("1337 "))
    assert "0.10ms" in row and "0.13ms" in row and "23654" in row and "260.2" in row
    assert [b.label for b in s.host] == ["host CPU (8 vCPU)", "mem"]
    assert s.host[1].text.endswith(f"/{human_bytes(33117732864)}")


def test_tag_filter_keeps_matching_runtimes_and_their_cores() -> None:
    s = screen_from_report(cwagent(), re.compile("^123$"))
    assert [r.tag for r in s.runtimes] == ["123"] and s.hidden_runtimes == 1
    assert s.cores[6].utilization == 0.0  # runtime 367's load is filtered out
    out = text(cwagent(), tag_filter=re.compile("^123$"), filter_text="^123$", width=100, height=30)
    assert "1 hidden" in out


def test_several_runtimes_on_one_core_add_up_capped() -> None:
    report = cwagent()
    second = report["neuron_runtime_data"][1]["report"]["neuroncore_counters"]["neuroncores_in_use"]
    second["6"] = {"neuroncore_utilization": 70.0}
    s = screen_from_report(report)
    assert s.cores[6].utilization == 100.0
    assert set(s.cores[6].tags) == {"367", "123"}


def test_malformed_report_parts_read_as_absent_and_are_named() -> None:
    report = cwagent()
    report["system_data"]["vcpu_usage"] = "garbage"
    report["neuron_runtime_data"].append(42)
    report["neuron_runtime_data"][0]["report"]["execution_stats"] = None
    report["neuron_runtime_data"][1]["report"]["memory_used"]["neuron_runtime_used_bytes"]["host"] = "lots"
    report["neuron_hardware_info"]["neuron_device_count"] = "sixteen"
    s = screen_from_report(report)
    assert (s.host[0].label, s.host[0].percent) == ("host CPU", None)  # the CPU bar stays, empty
    assert s.runtimes[0].cell("exec/s") == "-"
    assert s.runtimes[1].cell("host") == "-"
    assert len(s.cores) == 32  # the device count is derived from the cores seen
    assert any(e.startswith("malformed report: ") for e in s.errors)
    assert any("memory_used: malformed: " in e and "host" in e for e in s.errors)
    text(report, width=80, height=24)
    assert screen_from_report({}).runtimes == ()
    text({}, width=80, height=24)


def test_telemetry_lights_up_when_the_group_is_present() -> None:
    report = copy.deepcopy(cwagent())
    assert not _has_power(screen_from_report(report))
    out = text(report, width=120)
    assert "power" not in out.splitlines()[3]
    report["system_data"]["neuron_device_telemetry"] = {
        "period": 1.0,
        "neuron_devices": [
            {
                "neuron_device_index": 0,
                "power": {"status": "VALID", "sample_time": 1.7e9, "min_percent": 10, "max_percent": 60.0,
                          "avg_percent": 42.0},
                "healthy": True,
                "unhealthy_components": [],
            },
            {"neuron_device_index": 1, "power": {"status": "NO_DATA"}, "healthy": False,
             "unhealthy_components": ["hbm0"]},
        ],
        "error": "",
    }  # fmt: skip
    s = screen_from_report(report)
    assert _has_power(s)
    assert (s.devices[0].cell("power"), s.devices[0].cell("health")) == ("42%", "ok")
    assert (s.devices[1].cell("power"), s.devices[1].cell("health")) == ("no_data", "UNHEALTHY hbm0")
    assert s.devices[2].cell("power") == "-"  # a device the group does not list
    lines = text(report, width=120).splitlines()
    header = next(line for line in lines if line.startswith("dev "))
    assert "power" in header and "health" in header
    dev0 = next(line for line in lines if re.match(r"\s+0 \[", line))
    dev1 = next(line for line in lines if re.match(r"\s+1 \[", line))
    assert "42%" in dev0 and " ok" in dev0
    assert "no_data" in dev1 and "UNHEALTHY hbm0" in dev1


def _has_power(screen: Screen) -> bool:
    return any(c.header == "power" for c in screen.device_columns)


@pytest.mark.parametrize(("width", "height"), [(80, 24), (200, 60), (40, 10)])
@pytest.mark.parametrize("view", ["d", "c", "r"])
def test_every_view_fits_the_terminal(width: int, height: int, view: str) -> None:
    screen = screen_from_report(cwagent())
    for help_ in (False, True):
        lines = render(Frame(screen=screen, view=view, help=help_, messages=("a problem",)), width, height)
        assert len(lines) == height
        assert all(sum(len(t) for t, _ in line) <= width for line in lines)
        out = plain(lines)
        assert "neuron-monitor-top" in out and "a problem" in out


def test_scrolling_shows_a_window_and_a_marker() -> None:
    screen = screen_from_report(cwagent())
    out = plain(render(Frame(screen=screen, view="d", scroll=5), 80, 12))
    assert "5 above" in out and re.search(r"^\s+5 \[", out, re.M)
    assert not re.search(r"^\s+0 \[", out, re.M)


def test_waiting_screen_and_helpers() -> None:
    out = plain(render(Frame(screen=None, source="stdin", messages=("stdin ended",)), 80, 24))
    assert "waiting for the first report" in out and "stdin ended" in out
    assert core_ranges((0, 1, 2, 3, 8, 10, 11)) == "0-3,8,10-11"
    assert core_ranges(()) == "-"
    assert human_bytes(9043968) == "8.6M" and human_bytes(None) == "-" and human_bytes(512) == "512B"


def test_physical_cores_behind_a_logical_core() -> None:
    report = cwagent()
    core6 = report["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["6"]
    core6["v3d"] = {"nc_v3.0": {"neuroncore_utilization": 40.0}, "nc_v3.1": {"neuroncore_utilization": 42.8}}
    s = screen_from_report(report)
    assert s.cores[6].physical == (40.0, 42.8)
    wide = text(report, width=120)
    assert "then each physical core" in wide and re.search(r" 6 \[[^]]*\]  41% 40/43", wide)
    narrow = plain(render(Frame(screen=s, view="c"), 50, 24))
    assert "physical" not in narrow and " 6 [" in narrow  # no room: logical cores only


def test_age_of_a_report_without_report_time_counts_from_its_arrival() -> None:
    screen = screen_from_report(cwagent())  # AWS's daemon writes no report_time
    assert screen.report_time is None
    title = plain(render(Frame(screen=screen, now=1000.0, received=997.5), 120, 24)).splitlines()[0]
    assert title.endswith("(2.5s ago)") and "received " in title
    timed = dict(cwagent(), report_time=990.0)
    title = plain(render(Frame(screen=screen_from_report(timed), now=1000.0, received=997.5), 120, 24)).splitlines()[0]
    assert title.endswith("(10.0s ago)") and "received" not in title
    title = plain(render(Frame(screen=screen, now=None, received=997.5), 120, 24)).splitlines()[0]
    assert "ago" not in title  # a replay shows its position instead


def test_models_view_numbers_cores_across_the_host_as_the_runtimes_view() -> None:
    """A subgraph on core 1 of device 5 of a trn1n.32xlarge (2 cores per device) runs on NeuronCore 11, as the
    runtimes view, det and the other views number it, shown in the same ranges ("10-11", not "1")."""
    report = cwagent()
    s = screen_from_report(report)
    expect: dict[str, set[int]] = {}
    for rt in report["neuron_runtime_data"]:
        for m in rt["report"]["memory_used"]["loaded_models"]:
            for sg in m["subgraphs"].values():
                core = sg["neuron_device_index"] * s.cores_per_device + sg["neuroncore_index"]
                expect.setdefault(f"{rt['neuron_runtime_tag']}/{m['model_id']}", set()).add(core)
    got = {f"{r.tag}/{m.model_id}": set(m.cores) for r in s.runtimes for m in r.models or ()}
    assert got == expect and any(c >= s.cores_per_device for cores in got.values() for c in cores)
    shown = text(report, width=140, view="m")
    first = next(r.models[0] for r in s.runtimes if r.models)
    assert core_ranges(first.cores) in shown


def test_a_host_without_efa_adapters_shows_no_error() -> None:
    """The exporters treat efa_counters' "no EFA adapters" as an absent source, not a failure: so does top; a real
    EFA failure still shows."""
    report = cwagent()
    report["system_data"]["efa_counters"] = {
        "period": 5.0,
        "error": "no EFA adapters under /sys/class/infiniband (no EFA interface attached, or the efa driver is not"
        " loaded)",
    }
    assert not [e for e in screen_from_report(report).errors if "efa_counters" in e]
    report["system_data"]["efa_counters"]["error"] = "rdmap16s27: hw_counters: Permission denied"
    assert "efa_counters: rdmap16s27: hw_counters: Permission denied" in screen_from_report(report).errors


def test_a_runtime_that_could_not_be_read_is_not_an_idle_core() -> None:
    """job-05 (cores 20-23, device 5) with its neuroncore_counters unreadable, job-09 (device 9) with its
    memory_used unreadable: their cores and device show no utilization / no memory ("-", a "?" bar), the rest
    their figures (before: 0 % and 0B, an idle, empty device nobody had measured)."""
    report = trn2_report()
    for entry in report["neuron_runtime_data"]:
        groups = entry["report"]
        if entry["neuron_runtime_tag"] == "job-05":
            groups["neuroncore_counters"] = {"period": 1.0, "error": "cannot read the counters"}
        if entry["neuron_runtime_tag"] == "job-09":
            groups["memory_used"] = {"period": 1.0, "error": "cannot read the memory"}
    s = screen_from_report(report)
    util = {c.index: c.utilization for c in s.cores}
    assert [util[c] for c in range(20, 24)] == [None] * 4
    assert all(util[c] is not None and util[c] > 0 for c in range(64) if not 20 <= c < 24)
    devices = {d.index: d for d in s.devices}
    assert devices[5].utilization is None and devices[4].utilization is not None
    assert devices[9].memory_used is None and devices[9].memory_unread
    assert all(devices[d].memory_used for d in range(16) if d != 9)
    text = plain(render(Frame(screen=s, now=None), 120, None))
    row = next(line for line in text.splitlines() if line.startswith("  9 "))
    assert "?" in row and "-/96.0G" in row, row
    row = next(line for line in text.splitlines() if line.startswith("  5 "))
    assert re.search(r"\[ *\? *\] +- ", row), row
