"""Registry of metric groups: one module per group, looked up by its ``type`` name.

Modules are imported lazily, so a host-only configuration never imports the Neuron device code.
Each module defines ``GROUP``, the group class.
"""

from __future__ import annotations

import importlib

from neuron_monitor.groups.base import RuntimeGroup, SystemGroup

SYSTEM_GROUPS: tuple[str, ...] = ("vcpu_usage", "memory_info", "neuron_hw_counters")
RUNTIME_GROUPS: tuple[str, ...] = (
    "neuroncore_counters",
    "execution_stats",
    "memory_used",
    "neuron_runtime_vcpu_usage",
)


def load_system_group(type_name: str) -> type[SystemGroup]:
    if type_name not in SYSTEM_GROUPS:
        raise KeyError(type_name)
    group: type[SystemGroup] = importlib.import_module(f"neuron_monitor.groups.{type_name}").GROUP
    return group


def load_runtime_group(type_name: str) -> type[RuntimeGroup]:
    if type_name not in RUNTIME_GROUPS:
        raise KeyError(type_name)
    group: type[RuntimeGroup] = importlib.import_module(f"neuron_monitor.groups.{type_name}").GROUP
    return group
