"""The shared value readers that group specs build on: an array of entries and an entry named by its index."""

from __future__ import annotations

from typing import Any

from neuron_monitor.schema.values import Problems, entries, indexed, text


def _name(raw: Any, problems: Problems, where: str) -> str | None:
    """A test entry reader: the ``name`` of an object, None for anything else (left out)."""
    return text(raw["name"], problems, where, "name") if isinstance(raw, dict) else None


def test_entries_reads_each_element_with_its_path_and_leaves_out_none() -> None:
    problems = Problems()
    body = {"ports": [{"name": "a"}, 7, {"name": ["x"]}, {"name": "b"}]}
    assert entries(body, "ports", problems, "system_data.g", _name) == ["a", "", "b"]
    assert problems.values == ["system_data.g.ports[2].name: expected a string, got list"]
    assert not problems.counts


def test_entries_of_a_missing_or_wrong_array() -> None:
    problems = Problems()
    assert entries({}, "ports", problems, "g", _name) == []
    assert entries({"ports": None}, "ports", problems, "g", _name) == []
    assert not problems
    assert entries({"ports": {"name": "a"}}, "ports", problems, "g", _name) == []
    assert problems.counts == ["g.ports: expected an array, got dict"]


def test_indexed_names_an_entry_by_its_index() -> None:
    problems = Problems()
    assert indexed({"neuron_device_index": 3, "x": 1}, problems, "d[0]", "neuron_device_index") == (
        {"neuron_device_index": 3, "x": 1},
        "3",
        3,
    )
    assert indexed({"neuron_device_index": "2"}, problems, "d[1]", "neuron_device_index")[1:] == ("2", 2)
    assert indexed({}, problems, "d[2]", "neuron_device_index") == ({}, "", None)
    assert not problems
    assert indexed("no", problems, "d[3]", "neuron_device_index") == ({}, "", None)
    assert indexed({"neuron_device_index": [1]}, problems, "d[4]", "neuron_device_index")[1:] == ("", None)
    assert problems.counts == [
        "d[3].: expected an object, got str",
        "d[4].neuron_device_index: expected a string, got list",
    ]
