"""Which pod owns which NeuronCore and Neuron device: pod-resources allocations -> ``neuron_k8s_info`` maps.

Reads: the pods returned by the kubelet's List (see podresources.py) and, optionally, the node's allocatable
devices. Returns: ``{"<core index>": {"pod_name", "namespace", "container_name": [...]}}`` for cores and the
same for devices, as AWS's ``neuron_k8s_info`` object has them.

Device-plugin IDs: ``aws.amazon.com/neuroncore`` IDs are NeuronCore indices; ``aws.amazon.com/neuron`` IDs
(and the older alias ``aws.amazon.com/neurondevice``) are device indices. A device allocation covers the cores
``device * cores_per_device + i``. A core allocation marks its device ``core // cores_per_device`` when no other
pod holds cores of that device (a device whose cores several pods share has no single owner and is left out of
the device map). Without a known ``cores_per_device`` only the allocated kind is mapped. IDs that are not plain
decimal integers are skipped and counted, never guessed at (the Neuron device plugin issues indices); so are
indices above the bound ``max_index``. When two pods claim the same index (allocations are exclusive, so this
means stale kubelet state) the first pod in (namespace, name) order keeps it and the conflict is counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from neuron_monitor.k8s.podresources import ContainerDevices, PodResources

NEURONCORE_RESOURCES: frozenset[str] = frozenset({"aws.amazon.com/neuroncore"})
NEURON_DEVICE_RESOURCES: frozenset[str] = frozenset({"aws.amazon.com/neuron", "aws.amazon.com/neurondevice"})
MAX_INDEX = 4095
MAX_CONTAINERS_PER_ENTRY = 32


@dataclass
class Attribution:
    """The two maps of ``neuron_k8s_info`` plus what was left out and why."""

    cores: dict[str, dict[str, object]] = field(default_factory=dict)
    devices: dict[str, dict[str, object]] = field(default_factory=dict)
    skipped_ids: list[str] = field(default_factory=list)
    shared_devices: list[int] = field(default_factory=list)
    conflicts: int = 0


def parse_index(device_id: str, max_index: int = MAX_INDEX) -> int | None:
    """A device-plugin ID as an index, or None if it is not a plain decimal integer within the bound."""
    if not device_id.isascii() or not device_id.isdigit():
        return None
    idx = int(device_id)
    return idx if idx <= max_index else None


def cores_per_device_from(allocatable: Iterable[ContainerDevices] | None) -> int | None:
    """Infer cores per device from the node's allocatable cores and devices (None if not both known)."""
    if allocatable is None:
        return None
    cores: set[str] = set()
    devices: set[str] = set()
    for dev in allocatable:
        if dev.resource_name in NEURONCORE_RESOURCES:
            cores.update(dev.device_ids)
        elif dev.resource_name in NEURON_DEVICE_RESOURCES:
            devices.update(dev.device_ids)
    if not cores or not devices or len(cores) % len(devices):
        return None
    return len(cores) // len(devices)


def _claim(
    table: dict[int, tuple[tuple[str, str], list[str]]], idx: int, owner: tuple[str, str], container: str
) -> bool:
    """Record ``container`` of pod ``owner`` on index ``idx``; False if another pod already holds it."""
    entry = table.get(idx)
    if entry is None:
        table[idx] = (owner, [container])
        return True
    if entry[0] != owner:
        return False
    names = entry[1]
    if container not in names and len(names) < MAX_CONTAINERS_PER_ENTRY:
        names.append(container)
    return True


def _as_map(table: dict[int, tuple[tuple[str, str], list[str]]]) -> dict[str, dict[str, object]]:
    return {
        str(idx): {"pod_name": owner[1], "namespace": owner[0], "container_name": sorted(names)}
        for idx, (owner, names) in sorted(table.items())
    }


def attribute(pods: Iterable[PodResources], cores_per_device: int | None, max_index: int = MAX_INDEX) -> Attribution:
    """Build the core and device maps from the kubelet's allocations."""
    cpd = cores_per_device if cores_per_device and cores_per_device > 0 else None
    cores: dict[int, tuple[tuple[str, str], list[str]]] = {}
    devices: dict[int, tuple[tuple[str, str], list[str]]] = {}
    # devices touched by core-level allocations: device -> owner -> containers
    via_cores: dict[int, dict[tuple[str, str], list[str]]] = {}
    out = Attribution()
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        owner = (pod.namespace, pod.name)
        for container in pod.containers:
            for alloc in container.devices:
                is_core = alloc.resource_name in NEURONCORE_RESOURCES
                if not is_core and alloc.resource_name not in NEURON_DEVICE_RESOURCES:
                    continue
                for device_id in alloc.device_ids:
                    idx = parse_index(device_id, max_index)
                    if idx is None:
                        out.skipped_ids.append(f"{alloc.resource_name}={device_id}")
                        continue
                    if is_core:
                        ok = _claim(cores, idx, owner, container.name)
                        if cpd:
                            via_cores.setdefault(idx // cpd, {}).setdefault(owner, []).append(container.name)
                    else:
                        ok = _claim(devices, idx, owner, container.name)
                        if cpd:
                            for core in range(idx * cpd, min((idx + 1) * cpd, max_index + 1)):
                                ok = _claim(cores, core, owner, container.name) and ok
                    if not ok:
                        out.conflicts += 1
    for dev, owners in via_cores.items():
        if len(owners) != 1:
            out.shared_devices.append(dev)  # cores of one device held by several pods: no single owner
            continue
        ((owner, names),) = owners.items()
        for name in names:
            if not _claim(devices, dev, owner, name):
                out.conflicts += 1
                break
    out.cores = _as_map(cores)
    out.devices = _as_map(devices)
    return out
