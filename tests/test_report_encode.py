"""``report.encode``: a value JSON cannot carry costs its group (sent as the group's error), never the report."""

from __future__ import annotations

import orjson

from neuron_monitor import report as rpt


def _report(bad: object) -> dict[str, object]:
    good = rpt.group_object({"memory_total_bytes": 5}, 1.0, "", True)
    runtime_groups = {
        "neuroncore_counters": rpt.group_object({"flops": bad}, 0.5, "", True),
        "memory_used": rpt.group_object({"bytes": 7}, 0.5, "", False),
    }
    return {
        "neuron_runtime_data": [rpt.runtime_entry(11, "job", "", runtime_groups)],
        "system_data": {"memory_info": good, "vcpu_usage": rpt.group_object({"x": bad}, 1.0, "", True)},
        "instance_info": rpt.empty_instance_info(""),
        "neuron_hardware_info": rpt.empty_hardware_info(""),
        "report_time": 1.7e9,
        "neuron_monitor": {"version": "0.1.0", "reports": bad},
    }


def test_a_value_beyond_64_bits_becomes_its_groups_error() -> None:
    line = rpt.encode(_report(2**70))
    assert line.endswith(b"\n")
    out = orjson.loads(line)
    system = out["system_data"]
    assert system["memory_info"]["memory_total_bytes"] == 5 and system["memory_info"]["error"] == ""
    assert set(system["vcpu_usage"]) == {"period", "error", "fresh"} and "64 bits" in system["vcpu_usage"]["error"]
    groups = out["neuron_runtime_data"][0]["report"]
    assert groups["memory_used"]["bytes"] == 7 and groups["memory_used"]["fresh"] is False
    assert groups["neuroncore_counters"]["error"] and groups["neuroncore_counters"]["period"] == 0.5
    assert out["neuron_monitor"] == {"version": "0.1.0"}  # an info object keeps what encodes
    assert out["report_time"] == 1.7e9


def test_an_encodable_report_is_encoded_as_is() -> None:
    report = _report(3)
    assert rpt.encode(report) == orjson.dumps(report) + b"\n"
    assert rpt.encode_each_group(report) == report
