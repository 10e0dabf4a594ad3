"""The spec hooks consumers read instead of group names: runtime facts, device counts, top's drawn sums."""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.state import has_device_data
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.values import Problems
from neuron_monitor.top import model as top_model


def test_merge_takes_each_field_from_the_first_group_that_knows_it() -> None:
    a = S.RuntimeFacts(cores_in_use=frozenset({1, 2}), utilization={1: 0.0})
    b = S.RuntimeFacts(cores_in_use=frozenset({9}), models=2, executions=0)
    merged = S.merge_facts([a, S.NO_FACTS, b])
    assert merged.cores_in_use == {1, 2} and merged.models == 2 and merged.executions == 0
    assert merged.utilization == {1: 0.0} and merged.utilization_period is None
    assert S.merge_facts([]) is S.NO_FACTS


def test_a_runtime_works_on_its_model_cores_else_its_memory_cores_else_those_in_use() -> None:
    in_use, memory, models = frozenset({4, 5}), frozenset({6}), frozenset({7, 3})
    assert S.RuntimeFacts(cores_in_use=in_use, memory_cores=memory, model_cores=models).cores() == (3, 7)
    assert S.RuntimeFacts(cores_in_use=in_use, memory_cores=memory, model_cores=frozenset()).cores() == (6,)
    assert S.RuntimeFacts(cores_in_use=in_use, memory_cores=frozenset()).cores() == (4, 5)
    assert S.NO_FACTS.cores() == ()


def test_every_runtime_group_fact_comes_from_a_spec_hook() -> None:
    """Each field of RuntimeFacts is told by some registered group (nothing is read by name)."""
    body = {
        "neuroncore_counters": {
            "period": 1.0,
            "neuroncores_in_use": {"0": {"neuroncore_utilization": 0.0}, "1": {"neuroncore_utilization": 12.5}},
        },
        "memory_used": {
            "period": 1.0,
            "neuron_runtime_used_bytes": {
                "host": 1,
                "neuron_device": 2,
                "usage_breakdown": {"neuroncore_memory_usage": {"1": {"tensors": 10}, "3": {"tensors": 0}}},
            },
            "loaded_models": [
                {"name": "m", "model_id": "1", "is_running": True, "subgraphs": {
                    "sg": {"neuroncore_index": 1, "neuron_device_index": 2, "memory_used_bytes": {"host": 1}}}},
            ],
        },
        "execution_stats": {"period": 1.0, "execution_summary": {"completed": 3, "timed_out": 1}},
    }  # fmt: skip
    facts = []
    for name, group in body.items():
        spec = S.registry().get(name)
        assert spec is not None
        facts.append(spec.runtime_facts(spec.read(group, name, Problems()), 1.0, 4))
    merged = S.merge_facts(facts)
    assert merged.cores_in_use == {0, 1} and merged.utilization == {0: 0.0, 1: 12.5}
    assert merged.utilization_period == 1.0 and merged.executions == 4
    assert merged.memory_cores == {1} and merged.model_cores == {9} and merged.models == 1
    assert merged.cores() == (9,)
    stats = S.registry().get("execution_stats")
    assert stats is not None  # a carried-over period says nothing about executions
    assert stats.runtime_facts(stats.read(body["execution_stats"], "x", Problems()), None, 4).executions is None


def test_readiness_counts_devices_through_the_spec() -> None:
    listed = {"system_data": {"neuron_device_health": {"neuron_devices": [{"neuron_device_index": 0}]}}}
    assert has_device_data(listed)
    assert not has_device_data({"system_data": {"neuron_device_health": {"neuron_devices": []}}})
    assert not has_device_data({"system_data": {}})
    assert has_device_data({"neuron_hardware_info": {"neuron_device_count": 2}})


def test_top_draws_the_sums_the_specs_name_for_it() -> None:
    assert top_model.UTILIZATION_SUM.top == S.TOP_CORE_UTILIZATION and top_model.UTILIZATION_SUM.total is not None
    assert top_model.MEMORY_SUM.integer and "tensors" in top_model.MEMORY_CATEGORIES
    assert top_model.PHYSICAL_SUM.top == S.TOP_CORE_PHYSICAL
