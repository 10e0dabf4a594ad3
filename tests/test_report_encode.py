"""``report.encode``: a value JSON cannot carry costs its group (sent as the group's error), never the report.
`fresh_group_object` beside its careful twin `group_object`."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.daemon import report as rpt


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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
body_keys = st.sampled_from(["period", "error", "fresh", "a", "b", "neuroncores_in_use"]) | st.text(max_size=6)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(body_keys, json_values, max_size=6), st.floats(0.0, 1e6, allow_nan=False))
def test_fresh_group_object_is_group_object_of_a_body_just_collected(body: dict[str, Any], window: float) -> None:
    made = rpt.fresh_group_object(body, window)
    careful = rpt.group_object(body, body.get("period", window), body.get("error", ""), True)
    assert list(made.items()) == list(careful.items())  # the same keys, order and values
