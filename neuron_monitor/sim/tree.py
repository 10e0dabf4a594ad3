"""Builds the simulated host's own file tree under a root, and the file types every part rewrites in place.

What is created here (all paths below the root), for a `Shape` and a driver (`layouts.DriverLayout`: a version, or
a reorganized layout's name):

- ``sys/devices/virtual/neuron_device/neuronN/`` (`DeviceTree`): ``core_count`` (no newline),
  ``connected_devices``, ``reset``, ``info/notify_delay``, ``info/architecture/{arch_type,instance_type,
  device_name}``, ``info/serial_number`` (not on v1) and, per physical core, ``neuron_coreK/info/architecture/
  arch_type`` (layout ``moved-cores``: ``cores/neuron_coreK/``). ``sys/class/neuron_device/neuronN`` links to it.
  Every other file below it belongs to a group's simulator part (``groups/<name>/sim.py``, see part.py), made
  through `SimPart.device_nodes` and kept in ``DeviceTree.nodes``: the ECC counters (neuron_hw_counters), the
  health status (neuron_device_health), power, memory by category and the per-core status and busy counters
  (neuron_device_telemetry). `DeviceTree` tells them where: ``top`` (the device's directory), ``stats`` (its
  ``stats``, under ``metrics/`` before driver 2.8), ``core_stats`` (each core's ``stats``).
- ``dev/neuronN``: a sparse regular file holding the device's 16 NDS slabs back to back (slot s at s x 256 KiB,
  exactly the mmap offsets the ACQUIRE ioctl returns), and ``dev/neuron-sim/`` for ``neuronN.ioctl`` (see
  neuron/layout.py; the animator writes them).
- `write_host_files`: ``sys/module/neuron/version`` (the driver version), ``sys/class/dmi/id/product_name``,
  ``opt/aws/neuron/logical_nc_config`` when the LNC differs from the default, the driver's UltraServer class
  attributes ``sys/class/neuron_device/{server_id,node_id}_{2,4}`` and ``ultraserver_mode`` (a member of a 4-node
  pod for trn2u shapes, "not in a pod" otherwise), and the ``proc`` and ``run/neuron-sim`` directories.

The host's ``proc/stat``, ``proc/meminfo`` and ``proc/uptime`` are the parts of vcpu_usage, memory_info and
neuron_runtime_vcpu_usage; ``proc/<pid>`` links to the real worker processes are the animator's.

Files that change are rewritten in place (pwrite at offset 0, then truncate: `InPlaceFile`, `ReopenedFile`), never
replaced, because readers keep their descriptors open. `TreeBuilder` makes each directory once and removes the
tree without listing it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.layouts import DriverLayout, driver_layout, driver_tuple
from neuron_monitor.sim.shapes import SERIAL_BASE, Shape

if TYPE_CHECKING:
    from neuron_monitor.sim.part import DeviceNodes

__all__ = ["DeviceTree", "InPlaceFile", "ReopenedFile", "TreeBuilder", "driver_tuple", "write_host_files"]

SYSFS_DEVICES = "sys/devices/virtual/neuron_device"
SYSFS_CLASS = "sys/class/neuron_device"


class TreeBuilder:
    """Creates a tree's directories and files, each with as few system calls as can be (one ``mkdir`` per
    directory, no ``stat``: it remembers what it made or found), and removes them again without listing them."""

    __slots__ = ("files", "made")

    def __init__(self) -> None:
        self.made: set[str] = set()
        self.files: list[str] = []

    def make(self, path: str) -> str:
        """Create directory ``path`` and any missing parent (like ``mkdir -p``); return ``path``."""
        if path in self.made:
            return path
        parent = os.path.dirname(path)
        if parent != path and parent not in self.made:
            self.make(parent)  # up to the first directory already there, once per builder
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError:  # an existing directory above the tree that may not be written (e.g. /)
            if not os.path.isdir(path):
                raise
        self.made.add(path)
        return path

    def new(self, path: str) -> str:
        """Note a file about to be created at ``path`` (its directory exists), for `remove`; return ``path``."""
        self.files.append(path)
        return path

    def write(self, path: str, content: str | bytes) -> None:
        """Write a whole file (created or truncated), its directory made first."""
        self.make(os.path.dirname(path))
        write_new(self.new(path), content.encode() if isinstance(content, str) else content)

    def remove(self, top: str) -> None:
        """Remove ``top`` and everything below it: the files and directories made here without listing them
        (unlink, rmdir: half the cost of ``shutil.rmtree`` on a trn2.48xlarge tree), then whatever else is there
        (files others created, a directory not empty) with ``shutil.rmtree``."""
        below = os.path.join(top, "")
        for path in self.files:
            if path.startswith(below):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        for path in sorted((d for d in self.made if d.startswith(below)), reverse=True):  # children first
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)


def write_new(path: str | Path, content: bytes) -> None:
    """Create (or truncate) a file and write ``content``: open, write, close."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, content)
    finally:
        os.close(fd)


class InPlaceFile:
    """A file the simulator rewrites in place through one kept descriptor (created, or emptied, when made)."""

    __slots__ = ("_last", "fd", "path")

    def __init__(self, path: str | Path, content: bytes = b"") -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self._last = content
        if content:
            os.pwrite(self.fd, content, 0)

    def write(self, content: bytes) -> None:
        if content == self._last:
            return
        os.pwrite(self.fd, content, 0)
        if len(content) < len(self._last):
            os.ftruncate(self.fd, len(content))
        self._last = content

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:  # a tree dropped without close() gives its descriptors back
        with contextlib.suppress(OSError):
            self.close()


class ReopenedFile:
    """A file the simulator rewrites in place but seldom: opened for each write, so thousands of them (memory
    categories and status counters of a trn2.48xlarge) hold no descriptors. Created (or emptied) when made."""

    __slots__ = ("_last", "path")

    def __init__(self, path: str | Path, content: bytes = b"") -> None:
        self.path = path
        self._last = content
        write_new(path, content)

    def write(self, content: bytes) -> None:
        if content == self._last:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, content, 0)
            if len(content) < len(self._last):
                os.ftruncate(fd, len(content))
        finally:
            os.close(fd)
        self._last = content

    def close(self) -> None:
        """Nothing is kept open."""


class DeviceTree:
    """The sysfs and /dev files of one simulated Neuron device: the driver's device directory and what every
    group's simulator part puts in it (`SimPart.device_nodes`, kept in ``nodes`` by group name)."""

    def __init__(
        self,
        root: Path,
        shape: Shape,
        index: int,
        driver: str | DriverLayout,
        builder: TreeBuilder | None = None,
        absent: frozenset[str] = frozenset(),
    ) -> None:
        """Create the device's files below ``root`` (paths as strings and each directory made once: a trn2.48xlarge
        has about 430 files and 280 directories per device). ``driver``: a version or a layout (sim/layouts.py);
        ``builder``: shared by the devices of one host; ``absent``: node families the parts leave out."""
        from neuron_monitor.sim.part import parts  # the parts import this module

        self.index = index
        self.shape = shape
        self.layout = layout = driver_layout(driver, shape)
        self.absent = absent
        ver = layout.ver
        self.live_counters = ver >= (2, 30)
        self.dir = root / SYSFS_DEVICES / f"neuron{index}"
        self.builder = builder = builder or TreeBuilder()
        mk, put = builder.make, builder.write
        self.top = top = str(self.dir)
        stats_parent = f"{top}/metrics" if ver < (2, 8) else top
        self.stats = f"{stats_parent}/stats"  # the device's stats directory
        core_parent = f"{top}/{CORE_PARENT[layout.name]}" if layout.name in CORE_PARENT else top
        self.core_dirs = [f"{core_parent}/neuron_core{k}" for k in range(shape.phys_cores)]
        # each core's stats directory: below the core's directory, or below metrics/ before 2.8
        self.core_stats = [
            f"{stats_parent}/neuron_core{k}/stats" if ver < (2, 8) else f"{d}/stats"
            for k, d in enumerate(self.core_dirs)
        ]
        put(f"{top}/core_count", str(shape.phys_cores))
        peers = [str((index + k) % shape.devices) for k in (1, -1)] if shape.devices > 1 else []
        put(f"{top}/connected_devices", ", ".join(dict.fromkeys(peers)) + "\n")
        put(f"{top}/reset", "1\n")
        put(f"{top}/info/notify_delay", "-1\n")
        arch = f"{top}/info/architecture"
        put(f"{arch}/arch_type", shape.nd_arch + "\n")
        put(f"{arch}/instance_type", shape.instance_family + "\n")
        put(f"{arch}/device_name", shape.device_name + "\n")
        if shape.has_serial:
            put(f"{top}/info/serial_number", f"{SERIAL_BASE + index:016x}\n")
        for core_dir in self.core_dirs:
            put(f"{core_dir}/info/architecture/arch_type", shape.nc_arch + "\n")
        self.nodes: dict[str, DeviceNodes] = {}
        for name, part in parts():
            nodes = part.device_nodes(self)
            if nodes is not None:
                self.nodes[name] = nodes
        link = f"{mk(str(root / SYSFS_CLASS))}/neuron{index}"
        if not os.path.islink(link):
            os.symlink(os.path.relpath(top, os.path.dirname(link)), builder.new(link))
        # /dev/neuronN: the slabs, sparse; and the ioctl stand-in
        self.dev_path = root / "dev" / f"neuron{index}"
        mk(str(self.dev_path.parent))
        self.dev_fd = os.open(builder.new(str(self.dev_path)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.ftruncate(self.dev_fd, L.NDS_SLOTS * L.NDS_SIZE)
        self.ioctl_path = root / L.SIM_IOCTL_DIR / f"neuron{index}.ioctl"
        mk(str(self.ioctl_path.parent))

    def __getattr__(self, name: str) -> Any:
        """A group part's node by its attribute name, for tests that write a file of a static tree
        (``device.ecc["mem_ecc_uncorrected"]``: the ECC files of neuron_hw_counters' nodes)."""
        if name.startswith("__"):
            raise AttributeError(name)
        for nodes in self.__dict__.get("nodes", {}).values():
            if hasattr(nodes, name):
                return getattr(nodes, name)
        raise AttributeError(f"no group part of device {self.__dict__.get('index')} has nodes {name!r}")

    def close(self) -> None:
        for nodes in self.nodes.values():
            nodes.close()
        self._close_dev()

    def _close_dev(self) -> None:
        if self.__dict__.get("dev_fd", -1) >= 0:
            fd, self.dev_fd = self.dev_fd, -1
            os.close(fd)

    def __del__(self) -> None:  # the InPlaceFiles close themselves; the device file is ours
        with contextlib.suppress(OSError):
            self._close_dev()


# reorganized layouts (sim/layouts.py) that move every neuron_coreK directory, and the directory they move to
CORE_PARENT: dict[str, str] = {"moved-cores": "cores"}


def write_host_files(
    root: Path, shape: Shape, driver: str | DriverLayout, default_lnc: int, builder: TreeBuilder | None = None
) -> None:
    """The host's own files: driver version, DMI product name, UltraServer attributes, the LNC file when it differs
    from the default, and the ``proc`` and ``run/neuron-sim`` directories."""
    builder = builder or TreeBuilder()
    top = str(root)
    builder.write(f"{top}/sys/module/neuron/version", driver_layout(driver, shape).version + "\n")
    builder.write(f"{top}/sys/class/dmi/id/product_name", shape.name + "\n")
    for name, value in shape.ultraserver_files.items():
        builder.write(f"{top}/{SYSFS_CLASS}/{name}", value)
    if shape.lnc != default_lnc:
        builder.write(f"{top}/opt/aws/neuron/logical_nc_config", f"NEURON_LOGICAL_NC_CONFIG={shape.lnc}\n")
    builder.make(f"{top}/proc")
    builder.make(f"{top}/run/neuron-sim")
