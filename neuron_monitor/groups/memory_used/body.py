"""The body of ``memory_used``, defined once: the collector builds a `MemoryUsedBody`, the spec reads these keys.
``tests/groups/test_group_bodies.py`` checks that the constants are the TypedDicts' keys, that the data block's
memory counter maps (neuron/layout.py, below the groups) name the same categories, and that a collected body has
exactly these keys.

AWS's report spelling and key order; every amount is a whole number of bytes (a gauge). AWS's own reports were seen
to write the runtime's device total under ``device`` instead of ``neuron_device`` once (`LOCATION_DEVICE_ALIAS`):
the spec reads either, the collector writes ``neuron_device``.
"""

from __future__ import annotations

from typing import Final, TypedDict


class HostMemory(TypedDict):
    """Host memory by category (``usage_breakdown.host``, of the runtime and of a subgraph)."""

    application_memory: int
    constants: int
    dma_buffers: int
    tensors: int


class CoreMemory(TypedDict):
    """One (logical) NeuronCore's device memory by category (``neuroncore_memory_usage.<core>``)."""

    constants: int
    model_code: int
    model_shared_scratchpad: int
    runtime_memory: int
    tensors: int


class SubgraphDeviceMemory(TypedDict):
    """A subgraph's device memory by category (AWS prints no scratchpad for a subgraph)."""

    constants: int
    model_code: int
    runtime_memory: int
    tensors: int


class RuntimeBreakdown(TypedDict):
    host: HostMemory
    neuroncore_memory_usage: dict[str, CoreMemory]  # flat logical core index as text -> its memory


class RuntimeUsedBytes(TypedDict):
    """The runtime's totals (the sums of its breakdown) and the breakdown."""

    host: int
    neuron_device: int
    usage_breakdown: RuntimeBreakdown


class SubgraphBreakdown(TypedDict):
    host: HostMemory
    neuron_device: SubgraphDeviceMemory


class SubgraphUsedBytes(TypedDict):
    host: int
    neuron_device: int
    usage_breakdown: SubgraphBreakdown


class Subgraph(TypedDict):
    """One subgraph of a loaded model (``subgraphs.sg_NN``), on one NeuronCore of one device."""

    memory_used_bytes: SubgraphUsedBytes
    neuroncore_index: int  # the (logical) core within the device
    neuron_device_index: int


class LoadedModel(TypedDict):
    """One model on one device."""

    name: str
    uuid: str
    model_id: int
    is_running: bool
    subgraphs: dict[str, Subgraph]  # "sg_00", "sg_01", ... -> the subgraph


class MemoryUsedBody(TypedDict):
    """One application's object (the scheduler adds ``period``, ``error`` and ``fresh``)."""

    neuron_runtime_used_bytes: RuntimeUsedBytes
    loaded_models: list[LoadedModel]


NEURON_RUNTIME_USED_BYTES: Final = "neuron_runtime_used_bytes"
LOADED_MODELS: Final = "loaded_models"
FIELDS: Final = (NEURON_RUNTIME_USED_BYTES, LOADED_MODELS)  # in report order
# memory locations (the totals' keys, and usage_breakdown's of a subgraph)
LOCATION_HOST: Final = "host"
LOCATION_NEURON_DEVICE: Final = "neuron_device"
LOCATION_DEVICE_ALIAS: Final = "device"  # seen in one newer capture instead of "neuron_device" (read, not written)
MEMORY_LOCATIONS: Final = (LOCATION_HOST, LOCATION_NEURON_DEVICE)
USAGE_BREAKDOWN: Final = "usage_breakdown"
NEURONCORE_MEMORY_USAGE: Final = "neuroncore_memory_usage"
USED_FIELDS: Final = (LOCATION_HOST, LOCATION_NEURON_DEVICE, USAGE_BREAKDOWN)  # RuntimeUsedBytes/SubgraphUsedBytes
# memory categories: a NeuronCore's (CoreMemory), the host's (HostMemory) and a subgraph's on the device
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
HOST_APPLICATION_MEMORY: Final = "application_memory"
HOST_DMA_BUFFERS: Final = "dma_buffers"
HOST_MEMORY_CATEGORIES: Final = (HOST_APPLICATION_MEMORY, MEMORY_CONSTANTS, HOST_DMA_BUFFERS, MEMORY_TENSORS)
SUBGRAPH_DEVICE_CATEGORIES: Final = (MEMORY_CONSTANTS, MEMORY_MODEL_CODE, MEMORY_RUNTIME_MEMORY, MEMORY_TENSORS)
# a loaded model (LoadedModel), in report order
MODEL_NAME: Final = "name"
MODEL_UUID: Final = "uuid"
MODEL_ID: Final = "model_id"
MODEL_IS_RUNNING: Final = "is_running"
MODEL_SUBGRAPHS: Final = "subgraphs"
MODEL_FIELDS: Final = (MODEL_NAME, MODEL_UUID, MODEL_ID, MODEL_IS_RUNNING, MODEL_SUBGRAPHS)
# a subgraph (Subgraph), in report order
SUBGRAPH_MEMORY_USED_BYTES: Final = "memory_used_bytes"
SUBGRAPH_NEURONCORE_INDEX: Final = "neuroncore_index"
SUBGRAPH_NEURON_DEVICE_INDEX: Final = "neuron_device_index"
SUBGRAPH_FIELDS: Final = (SUBGRAPH_MEMORY_USED_BYTES, SUBGRAPH_NEURONCORE_INDEX, SUBGRAPH_NEURON_DEVICE_INDEX)
