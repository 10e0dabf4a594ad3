"""Named constants for the report's own vocabulary: top-level keys, a runtime entry's keys, the envelope keys,
group names, and the keys several groups share.

Values are exactly the strings AWS's neuron-monitor prints (plus our documented additions ``report_time``,
``neuron_monitor``, ``fresh``). Code that reads or writes a report names a key through these constants; the keys
inside one group's body are in that group's ``body.py`` (``groups/<name>/body.py``).
"""

from __future__ import annotations

from typing import Final

# ---- top level ----------------------------------------------------------------------------------------------
NEURON_RUNTIME_DATA: Final = "neuron_runtime_data"
SYSTEM_DATA: Final = "system_data"
INSTANCE_INFO: Final = "instance_info"
NEURON_HARDWARE_INFO: Final = "neuron_hardware_info"
NEURON_K8S_INFO: Final = "neuron_k8s_info"  # additive, when Kubernetes attribution is on
REPORT_TIME: Final = "report_time"  # additive
NEURON_MONITOR: Final = "neuron_monitor"  # additive: the daemon's own health

# ---- instance_info: AWS's keys in its order (the daemon writes each, "" when unknown, beside ``error``) ---------
INSTANCE_INFO_KEYS: Final = (
    "instance_name",
    "instance_id",
    "instance_type",
    "instance_availability_zone",
    "instance_availability_zone_id",
    "instance_region",
    "ami_id",
    "subnet_id",
)

# ---- a runtime entry ----------------------------------------------------------------------------------------
PID: Final = "pid"
RUNTIME_TAG: Final = "neuron_runtime_tag"
REPORT: Final = "report"

# ---- every group object -------------------------------------------------------------------------------------
PERIOD: Final = "period"
ERROR: Final = "error"
FRESH: Final = "fresh"  # additive
ENVELOPE_KEYS: Final = (PERIOD, ERROR, FRESH)

# ---- group names (AWS's groups; every group: the spec registry, schema/spec.py) --------------------------------------
NEURONCORE_COUNTERS: Final = "neuroncore_counters"
EXECUTION_STATS: Final = "execution_stats"
MEMORY_USED: Final = "memory_used"
NEURON_RUNTIME_VCPU_USAGE: Final = "neuron_runtime_vcpu_usage"
VCPU_USAGE: Final = "vcpu_usage"
MEMORY_INFO: Final = "memory_info"
NEURON_HW_COUNTERS: Final = "neuron_hw_counters"

# ---- a group's own keys: in its folder's body.py (groups/<name>/body.py), every group ---------------------------

# ---- the device groups' list of devices (neuron_hw_counters, neuron_device_telemetry, neuron_device_health) -----
NEURON_DEVICES: Final = "neuron_devices"
NEURON_DEVICE_INDEX: Final = "neuron_device_index"

# ---- neuron_hardware_info -----------------------------------------------------------------------------------
NEURONCORE_PER_DEVICE_COUNT: Final = "neuroncore_per_device_count"
