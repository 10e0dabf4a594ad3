"""The optional compiled helper (``neuron_monitor/_native.c``, built at install when a C compiler is present).

``NATIVE`` is the module, or None when it was not built (no compiler) or ``NEURON_MONITOR_NO_NATIVE`` is set to a
non-empty value (the daemon then runs only the pure-Python twins: the reference, and how the A/B in
docs/performance.md is measured). Each of its functions is called by exactly one named Python function that sits
beside its careful twin and falls back to it when the helper is missing or declines (returns None):

- ``vcpu_usage``: `neuron_monitor.groups.vcpu_usage.collector.usage_body_native` (twin: ``usage_body_careful``);
- ``deltas``: `neuron_monitor.neuron.deltas.device_deltas_native` (twin: ``device_deltas_careful``), and
  `neuron_monitor.neuron.deltas.memory_same_native` (twin: ``memory_same_careful``), which asks it for the deltas
  of the device memory counters with none of them frequent: none at all means none changed; with rate limits, the
  first implausible delta (`neuron_monitor.neuron.plausible`);
- ``cores``: `neuron_monitor.groups.neuroncore_counters.collector.cores_native` (twin: ``cores_careful``);
- ``summary``: `neuron_monitor.groups.execution_stats.collector.summary_native` (twin: ``summary_careful``);
- ``pid_usage``: `neuron_monitor.groups.neuron_runtime_vcpu_usage.collector.usage_native` (twin:
  ``usage_careful``);
- ``application``: `neuron_monitor.groups.application.collect_application_native` (twin:
  ``collect_application_careful``, the three groups' own ``collect`` composed): one application's
  neuroncore_counters, execution_stats and memory_used in one call (the three delta steps, ``cores``, ``summary``
  and memory_used's busy flags and memory comparison), when the three are due together and their trackers look back
  at the same reading. Its C shares the delta rule, ``cores`` and ``summary`` with the functions above.
- ``add_counts``: `neuron_monitor.exporters.prometheus.counting.add_counts_native` (twin: ``add_counts_plain``):
  the Prometheus exporter's ledger additions of one count, taken only when no value is impossible and no key is
  over the label cap.
- ``thin_report``: `neuron_monitor.exporters.prometheus.counting.thin_native` (twin: the line decoded whole): a
  report line with the values the exporter's counting never reads replaced by null, the line checked on the way.

Types: the helper's functions are typed by ``neuron_monitor/_native.pyi``. For mypy ``NATIVE`` is that module, so
every call's arguments and result are checked against the stub; at run time it may be None, and every caller
checks that first. The test suite runs the tests that reach these functions in both modes (tests/conftest.py).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["NATIVE"]


def _load() -> ModuleType | None:
    if os.environ.get("NEURON_MONITOR_NO_NATIVE"):
        return None
    try:
        from neuron_monitor import _native
    except ImportError:  # installed without a C compiler: the pure-Python twins run
        return None
    return _native


if TYPE_CHECKING:
    from neuron_monitor import _native as NATIVE  # the stub's types (see above)
else:
    NATIVE = _load()
