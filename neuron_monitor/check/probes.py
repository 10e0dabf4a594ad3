"""The sources `neuron-monitor --check` looks at itself, below the root: each probe returns `Line`s and never
raises. What each configured group needs (`NEEDS`) decides which lines make the exit code 1.

- the driver version file (``sys/module/neuron/version``) and each device's class directory;
- per device ``/dev/neuronN`` and each ioctl the daemon uses: GET_ALL_APPS_INFO (the attached processes),
  ACQUIRE_NEURON_DS (per process: its data block's offset and size), NEURON_IOCTL_DEVICE_BDF_EXT (the PCI address),
  and each data block itself (mapped read-only, its ``nds`` signature checked);
- the EFA adapters and the join of each Neuron device (groups/efa_counters/topology.py);
- ``proc/stat`` and ``proc/meminfo``; the kubelet's pod-resources socket; instance metadata (IMDS).

On a real device, opening ``/dev/neuronN`` read-write attaches this process as the daemon's own collection does;
the probes run after the collection's devices were closed, one device at a time.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from neuron_monitor.check.lines import ABSENT, FOUND, MISSING, OFF, UNKNOWN, UNREADABLE, Line
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.devio import DeviceIO, open_device
from neuron_monitor.neuron.pci import try_pci_address
from neuron_monitor.neuron.sysfs import CLASS_DIR, DriverTree

DRIVER_VERSION = "sys/module/neuron/version"
_SYSFS_GROUPS = ("neuron_hw_counters", "neuron_device_telemetry", "neuron_device_health")
_BLOCK_GROUPS = ("neuroncore_counters", "execution_stats", "memory_used")
_RUNTIME_GROUPS = (*_BLOCK_GROUPS, "neuron_runtime_vcpu_usage")
# source kind -> the groups that cannot report without it
NEEDS: dict[str, tuple[str, ...]] = {
    "driver": _SYSFS_GROUPS,
    "devices": (*_SYSFS_GROUPS, *_RUNTIME_GROUPS),
    "dev": _RUNTIME_GROUPS,
    "data_blocks": _BLOCK_GROUPS,
    "infiniband": ("efa_counters",),
    "proc/stat": ("vcpu_usage", "neuron_runtime_vcpu_usage"),
    "proc/meminfo": ("memory_info",),
}
MAX_PROCESSES_SHOWN = 16  # per device: more attached processes are counted, not listed one by one


def needed_by(kind: str, configured: Iterable[str]) -> str:
    """The configured groups that need source ``kind``, comma-joined ("" when none)."""
    have = set(configured)
    return ",".join(g for g in NEEDS.get(kind, ()) if g in have)


def _why(e: BaseException) -> str:
    if isinstance(e, OSError):
        name = errno.errorcode.get(e.errno or 0, "")
        text = e.strerror or str(e)
        return f"{name}: {text}" if name else text
    return str(e) or type(e).__name__


def _missing(e: BaseException) -> bool:
    return isinstance(e, FileNotFoundError | NotADirectoryError)


def driver_lines(root: RootFS, configured: Iterable[str]) -> tuple[list[Line], tuple[int, ...]]:
    """The driver version file and each device's class directory; also returns the device indexes."""
    configured = tuple(configured)
    lines: list[Line] = []
    try:
        version = root.read_text(DRIVER_VERSION).strip()[:64]
        lines.append(Line("driver version", FOUND, f"{DRIVER_VERSION}: {version}", needed_by("driver", configured)))
    except (OSError, ValueError) as e:
        status = MISSING if _missing(e) else UNREADABLE
        lines.append(Line("driver version", status, f"{DRIVER_VERSION}: {_why(e)}", needed_by("driver", configured)))
    devices = DriverTree(root).device_indexes()
    need = needed_by("devices", configured)
    if not devices:
        lines.append(Line("devices", MISSING, f"no neuronN under {CLASS_DIR} (is the driver loaded?)", need))
    for index in devices:
        rel = f"{CLASS_DIR}/neuron{index}"
        status = FOUND if root.is_dir(rel) else UNREADABLE
        lines.append(Line(f"device {index}", status, rel if status == FOUND else f"{rel}: not a directory", need))
    return lines, devices


def device_node_lines(root: RootFS, devices: tuple[int, ...], configured: Iterable[str]) -> list[Line]:
    """Per device: /dev/neuronN, GET_ALL_APPS_INFO, ACQUIRE_NEURON_DS and the data block per process, BDF_EXT."""
    configured = tuple(configured)
    need_dev = needed_by("dev", configured)
    need_blocks = needed_by("data_blocks", configured)
    lines: list[Line] = []
    for index in devices:
        node = f"/dev/neuron{index}"
        try:
            device = open_device(root, index)
        except OSError as e:
            lines.append(Line(node, MISSING if _missing(e) else UNREADABLE, _why(e), need_dev))
        else:
            try:
                kind = type(device).__name__
                lines.append(Line(node, FOUND, "character device" if kind == "IoctlDevice" else "simulated", need_dev))
                lines += _ioctl_lines(device, node, need_dev, need_blocks)
            finally:
                device.close()
        address, why = try_pci_address(root, index)
        lines.append(
            Line(f"{node} DEVICE_BDF_EXT", FOUND if address else UNKNOWN, address or why)
        )  # the EFA join's source: useful, never needed (the join stays unknown without it)
    return lines


def _ioctl_lines(dev: DeviceIO, node: str, need_dev: str, need_blocks: str) -> list[Line]:
    lines: list[Line] = []
    try:
        apps = dev.list_apps()
    except OSError as e:
        return [Line(f"{node} GET_ALL_APPS_INFO", UNREADABLE, _why(e), need_dev)]
    lines.append(Line(f"{node} GET_ALL_APPS_INFO", FOUND, f"{len(apps)} attached process(es)", need_dev))
    for k, app in enumerate(apps):
        if k == MAX_PROCESSES_SHOWN:
            lines.append(Line(f"{node} data blocks", FOUND, f"{len(apps) - k} more process(es) not probed"))
            break
        where = f"{node} pid {app.pid}"
        try:
            got = dev.acquire(app.pid)
        except OSError as e:
            lines.append(Line(f"{where} ACQUIRE_NEURON_DS", UNREADABLE, _why(e), need_blocks))
            continue
        if got is None:
            lines.append(Line(f"{where} data block", ABSENT, "no datastore (not a runtime, e.g. neuron-ls)"))
            continue
        offset, size = got
        lines.append(Line(f"{where} data block", *_block(dev, offset, size), need_blocks))
    return lines


def _block(dev: DeviceIO, offset: int, size: int) -> tuple[str, str]:
    try:
        mapping = dev.map_block(offset, size)
    except (OSError, ValueError) as e:
        return UNREADABLE, f"offset {offset} size {size}: {_why(e)}"
    try:
        signature = bytes(mapping.read()[: len(L.NDS_SIGNATURE)])
    except OSError as e:  # a file that shrank under us: a short read
        return UNREADABLE, f"offset {offset} size {size}: {_why(e)}"
    finally:
        mapping.close()
    if signature != L.NDS_SIGNATURE:
        return UNREADABLE, f"offset {offset} size {size}: signature {signature!r}, expected {L.NDS_SIGNATURE!r}"
    return FOUND, f"offset {offset} size {size}, signature ok"


def efa_lines(root: RootFS, devices: tuple[int, ...], configured: Iterable[str]) -> list[Line]:
    """The EFA adapters (each with the Neuron devices it serves) and each Neuron device's place for the join."""
    from neuron_monitor.groups.efa_counters import sysfs as F
    from neuron_monitor.groups.efa_counters import topology as T

    need = needed_by("infiniband", configured)
    adapters = F.list_adapters(root)
    if not adapters:
        return [Line("EFA adapters", ABSENT, f"no EFA adapter under {F.INFINIBAND}")]
    places = T.neuron_places(root, devices)
    lines: list[Line] = []
    for name in adapters:
        chain = T.pci_chain(root, f"{F.INFINIBAND}/{name}/device")
        pci = chain[-1] if chain else ""
        ports = F.list_ports(root, name)
        served = T.served_by(pci, chain, places)
        status = FOUND if ports else UNREADABLE
        detail = f"pci {pci or '?'}, ports {','.join(ports) or 'none'}, serves Neuron devices "
        detail += ",".join(map(str, served)) if served else "(unknown)"
        lines.append(Line(f"EFA {name}", status, detail, need))
    for index, place in places.items():
        if place.known:
            where = place.chain[-1] if place.chain else f"EFA adapter {place.efa_address}"
            lines.append(Line(f"EFA join device {index}", FOUND, f"{where} (from the {place.source})"))
        else:
            lines.append(Line(f"EFA join device {index}", UNKNOWN, place.why))
    return lines


def procfs_lines(root: RootFS, configured: Iterable[str]) -> list[Line]:
    lines = []
    for rel in ("proc/stat", "proc/meminfo"):
        need = needed_by(rel, configured)
        try:
            size = len(root.read_bytes(rel))
            lines.append(Line(rel, FOUND, f"{size} bytes", need))
        except (OSError, ValueError) as e:
            lines.append(Line(rel, MISSING if _missing(e) else UNREADABLE, _why(e), need))
    return lines


def kubelet_line(path: str, used: bool) -> Line:
    """The pod-resources socket (the path as given: the daemon opens it so, not below the root)."""
    source = "kubelet pod-resources socket"
    need = "neuron_k8s_info" if used else ""
    suffix = "" if used else " (read with --k8s-info)"
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return Line(source, MISSING if _missing(e) else UNREADABLE, f"{path}: {_why(e)}{suffix}", need)
    if not stat.S_ISSOCK(mode):
        return Line(source, UNREADABLE, f"{path}: not a socket{suffix}", need)
    return Line(source, FOUND, f"{path}{suffix}", need)


def imds_line(endpoint: str, timeout: float, enabled: bool) -> Line:
    """Instance metadata: the instance type, or why it could not be read (no credential is ever shown)."""
    if not enabled:
        return Line("instance metadata (IMDS)", OFF, "disabled (--no-imds, AWS_EC2_METADATA_DISABLED or simulated)")
    from neuron_monitor.host.imds import fetch_instance_info

    try:
        info = fetch_instance_info(endpoint, timeout)
    except Exception as e:  # never: the fetch reports its failures in ``error``
        return Line("instance metadata (IMDS)", UNREADABLE, _why(e))
    if info.instance_type:
        detail = f"instance type {info.instance_type}" + (f"; {info.error}" if info.error else "")
        return Line("instance metadata (IMDS)", FOUND, detail)
    return Line("instance metadata (IMDS)", MISSING, info.error or "no answer")
