"""Named constants for the report's vocabulary: top-level keys, group names, and the keys inside group bodies.

Values are exactly the strings AWS's neuron-monitor prints (plus our documented additions ``report_time``,
``neuron_monitor``, ``fresh``). Code that reads or writes a report names a key through these constants.
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

# ---- neuroncore_counters: its keys are in groups/neuroncore_counters/body.py ---------------------------------

# ---- execution_stats: its keys are in groups/execution_stats/body.py ---------------------------------------

# ---- memory_used --------------------------------------------------------------------------------------------
NEURON_RUNTIME_USED_BYTES: Final = "neuron_runtime_used_bytes"
USAGE_BREAKDOWN: Final = "usage_breakdown"
NEURONCORE_MEMORY_USAGE: Final = "neuroncore_memory_usage"
LOADED_MODELS: Final = "loaded_models"
LOCATION_HOST: Final = "host"
LOCATION_NEURON_DEVICE: Final = "neuron_device"
LOCATION_DEVICE_ALIAS: Final = "device"  # seen in one newer capture instead of "neuron_device"
MEMORY_LOCATIONS: Final = (LOCATION_HOST, LOCATION_NEURON_DEVICE)
# NeuronCore memory categories (neuroncore_memory_usage.<core> keys)
MEMORY_CONSTANTS: Final = "constants"
MEMORY_MODEL_CODE: Final = "model_code"
MEMORY_MODEL_SHARED_SCRATCHPAD: Final = "model_shared_scratchpad"
MEMORY_RUNTIME_MEMORY: Final = "runtime_memory"
MEMORY_TENSORS: Final = "tensors"
MEMORY_CATEGORIES: Final = (
    MEMORY_CONSTANTS,
    MEMORY_MODEL_CODE,
    MEMORY_MODEL_SHARED_SCRATCHPAD,
    MEMORY_RUNTIME_MEMORY,
    MEMORY_TENSORS,
)
# host memory categories (usage_breakdown.host keys)
HOST_MEMORY_CATEGORIES: Final = ("application_memory", "constants", "dma_buffers", "tensors")
# a loaded model
MODEL_ID: Final = "model_id"
MODEL_NAME: Final = "name"
MODEL_UUID: Final = "uuid"
MODEL_IS_RUNNING: Final = "is_running"
MODEL_SUBGRAPHS: Final = "subgraphs"
SUBGRAPH_MEMORY_USED_BYTES: Final = "memory_used_bytes"
SUBGRAPH_NEURONCORE_INDEX: Final = "neuroncore_index"
SUBGRAPH_NEURON_DEVICE_INDEX: Final = "neuron_device_index"

# ---- neuron_runtime_vcpu_usage: its keys are in groups/neuron_runtime_vcpu_usage/body.py -----------------------

# ---- vcpu_usage: its keys are in groups/vcpu_usage/body.py ---------------------------------------------------

# ---- memory_info: its keys are in groups/memory_info/body.py ---------------------------------------------------

# ---- neuron_hw_counters -------------------------------------------------------------------------------------
NEURON_DEVICES: Final = "neuron_devices"
NEURON_DEVICE_INDEX: Final = "neuron_device_index"
MEM_ECC_CORRECTED: Final = "mem_ecc_corrected"
MEM_ECC_UNCORRECTED: Final = "mem_ecc_uncorrected"
SRAM_ECC_CORRECTED: Final = "sram_ecc_corrected"
SRAM_ECC_UNCORRECTED: Final = "sram_ecc_uncorrected"
ECC_EVENTS: Final = (MEM_ECC_CORRECTED, MEM_ECC_UNCORRECTED, SRAM_ECC_CORRECTED, SRAM_ECC_UNCORRECTED)

# ---- neuron_hardware_info -----------------------------------------------------------------------------------
NEURONCORE_PER_DEVICE_COUNT: Final = "neuroncore_per_device_count"
