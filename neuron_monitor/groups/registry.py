"""Registry of the groups' collectors: one folder per group, its collector looked up by the group's ``type`` name.

The group names are those of the group specs (``neuron_monitor/groups/<name>/spec.py``: a spec is a group's
registration, here and for every consumer); each spec's placement says whether it is a system or a runtime group.
Collector modules are imported lazily, so a host-only configuration never imports the Neuron device code. Each
group's ``collector.py`` defines ``GROUP``, the group class.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from neuron_monitor.groups.base import RuntimeGroup, SystemGroup
from neuron_monitor.neuron.app import App
from neuron_monitor.schema.spec import registry

SYSTEM_GROUPS: tuple[str, ...] = tuple(registry().system)
RUNTIME_GROUPS: tuple[str, ...] = tuple(registry().runtime)


def load_system_group(type_name: str) -> type[SystemGroup]:
    if type_name not in SYSTEM_GROUPS:
        raise KeyError(type_name)
    group: type[SystemGroup] = importlib.import_module(f"neuron_monitor.groups.{type_name}.collector").GROUP
    return group


def load_runtime_group(type_name: str) -> type[RuntimeGroup]:
    if type_name not in RUNTIME_GROUPS:
        raise KeyError(type_name)
    group: type[RuntimeGroup] = importlib.import_module(f"neuron_monitor.groups.{type_name}.collector").GROUP
    return group


# The runtime groups computed from an application's data block that groups/application.py collects in one compiled
# call per application when all three are due together.
DATA_BLOCK_GROUPS = ("neuroncore_counters", "execution_stats", "memory_used")
CollectApplications = Callable[[Mapping[str, RuntimeGroup], Iterable[App]], dict[str, dict[int, dict[str, Any]]]]


@functools.cache
def load_collect_applications() -> CollectApplications:
    """groups/application.py's ``collect_applications``, imported lazily as the collectors are (it imports the
    three groups' collectors and the Neuron device code)."""
    collect: CollectApplications = importlib.import_module("neuron_monitor.groups.application").collect_applications
    return collect
