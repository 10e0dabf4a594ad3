"""Builds the simulated host's file tree under a root, and rewrites its files in place afterwards.

What is created (all paths below the root), for a `Shape` and a driver version:

- ``sys/devices/virtual/neuron_device/neuronN/``: ``core_count`` (no newline), ``connected_devices``,
  ``info/architecture/{arch_type,instance_type,device_name}``, ``info/serial_number`` (not on v1),
  ``stats/hardware/{mem,sram}_ecc_uncorrected`` and ``mem_ecc_repairable_uncorrected`` (not on v1), the
  ``*_ecc_corrected`` files (driver >= 2.30), ``neuron_coreK/info/architecture/arch_type`` and a few per-core
  counters (``stats/other_info/{nc_time_in_use,inference_count,flop_count}``, ``stats/status/success``,
  ``stats/memory_usage/device_mem``). Drivers before 2.8 put ``stats`` under ``metrics/``.
  ``sys/class/neuron_device/neuronN`` links to it; ``sys/module/neuron/version`` holds the driver version.
- ``dev/neuronN``: a sparse regular file holding the device's 16 NDS slabs back to back (slot s at s x 256 KiB,
  exactly the mmap offsets the ACQUIRE ioctl returns), and ``dev/neuron-sim/neuronN.ioctl`` (see layout.py).
- ``proc/stat``, ``proc/meminfo``, ``proc/uptime`` for the shape, ``proc/<pid>`` links to real worker processes.
- ``sys/class/dmi/id/product_name``; ``opt/aws/neuron/logical_nc_config`` when the LNC differs from the default;
  the driver's UltraServer class attributes ``sys/class/neuron_device/{server_id,node_id}_{2,4}``,
  ``ultraserver_mode`` (a member of a 4-node pod for trn2u shapes, "not in a pod" otherwise).

Files that change are rewritten in place (pwrite at offset 0, then truncate), never replaced, because readers keep
their descriptors open.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.shapes import SERIAL_BASE, Shape

SYSFS_DEVICES = "sys/devices/virtual/neuron_device"
SYSFS_CLASS = "sys/class/neuron_device"


def driver_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


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

    __slots__ = ("_last", "fd")

    def __init__(self, path: str | Path, content: bytes = b"") -> None:
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
    """The sysfs and /dev files of one simulated Neuron device."""

    def __init__(self, root: Path, shape: Shape, index: int, driver: str, builder: TreeBuilder | None = None) -> None:
        """Create the device's files below ``root`` (paths as strings and each directory made once: a trn2.48xlarge
        has about 430 files and 280 directories per device). ``builder``: shared by the devices of one host."""
        self.index = index
        ver = driver_tuple(driver)
        self.live_counters = ver >= (2, 30)
        self.dir = root / SYSFS_DEVICES / f"neuron{index}"
        builder = builder or TreeBuilder()
        mk, put = builder.make, builder.write
        top = str(self.dir)
        stats_parent = f"{top}/metrics" if ver < (2, 8) else top
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
        self.ecc: dict[str, InPlaceFile] = {}
        if shape.has_ecc_files:
            hw = mk(f"{stats_parent}/stats/hardware")
            names = ["mem_ecc_uncorrected", "sram_ecc_uncorrected"]
            if ver >= (2, 23):
                names.append("mem_ecc_repairable_uncorrected")
            if ver >= (2, 30):
                names += ["mem_ecc_corrected", "sram_ecc_corrected"]
            self.ecc = {n: InPlaceFile(builder.new(f"{hw}/{n}"), b"0\n") for n in names}
        self.health: InPlaceFile | None = None
        if shape.has_ecc_files and ver >= (2, 30, 2):
            hs = mk(f"{stats_parent}/stats/hardware/health_status")
            self.health = InPlaceFile(builder.new(f"{hs}/unhealthy_components"), b"\n")
            put(f"{hs}/healthcheck_heartbeat", b"1\n")
            put(f"{hs}/hw_error_event", b"0\n")
        self.power: InPlaceFile | None = None
        if ver >= (2, 21):
            power = mk(f"{stats_parent}/stats/power")
            self.power = InPlaceFile(builder.new(f"{power}/utilization"), b"POWER_STATUS_NO_DATA,0,0.00,0.00,0.00\n")
        # memory by category: {category: (total, peak)} files, on the device (host memory) and per core
        self.host_mem = _mem_files(builder, f"{stats_parent}/stats/memory_usage/host_mem", HOST_CATEGORIES, ver)
        self.status_names = [n for n, since in STATUS_COUNTERS if ver >= since]
        self.core_mem: list[dict[str, tuple[ReopenedFile, ReopenedFile]]] = []
        self.core_files: list[dict[str, InPlaceFile | ReopenedFile]] = []
        rels = ["other_info/nc_time_in_use", "other_info/inference_count", "other_info/flop_count",
                "memory_usage/device_mem", *(f"status/{n}" for n in self.status_names)]  # fmt: skip
        kept = ("other_info/nc_time_in_use", "status/success", "memory_usage/device_mem")
        for k in range(shape.phys_cores):
            put(f"{top}/neuron_core{k}/info/architecture/arch_type", shape.nc_arch + "\n")
            st = f"{stats_parent}/neuron_core{k}/stats"
            files: dict[str, InPlaceFile | ReopenedFile] = {}
            self.core_mem.append(_mem_files(builder, f"{st}/memory_usage/device_mem", DEVICE_CATEGORIES, ver))
            for rel in rels:
                d = mk(f"{st}/{rel}")
                files[rel] = (InPlaceFile if rel in kept else ReopenedFile)(builder.new(f"{d}/total"), b"0\n")
                if rel == "memory_usage/device_mem":
                    put(f"{d}/peak", b"0\n")
            self.core_files.append(files)
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

    def close(self) -> None:
        kept: list[InPlaceFile | ReopenedFile | None] = [*self.ecc.values(), self.health, self.power]
        for files in self.core_files:
            kept += files.values()
        for f in kept:
            if f is not None:
                f.close()
        self._close_dev()

    def _close_dev(self) -> None:
        if self.dev_fd >= 0:
            fd, self.dev_fd = self.dev_fd, -1
            os.close(fd)

    def __del__(self) -> None:  # the InPlaceFiles close themselves; the device file is ours
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: __init__ failed before opening it
            self._close_dev()


# the driver's memory categories (device memory per core, host memory per device) and the driver version that
# added them: the basic ones with 2.10, the rest with 2.18
DEVICE_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("model_code", (2, 10)), ("tensors", (2, 10)), ("constants", (2, 10)), ("model_shared_scratchpad", (2, 10)),
    ("runtime_memory", (2, 10)), ("driver_memory", (2, 18)), ("collectives", (2, 18)),
    ("nonshared_scratchpad", (2, 18)), ("notifications", (2, 18)), ("dma_rings", (2, 18)),
    ("uncategorized", (2, 18)),
)  # fmt: skip
HOST_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("dma_buffers", (2, 10)), ("tensors", (2, 10)), ("constants", (2, 10)), ("application_memory", (2, 10)),
    ("driver_memory", (2, 18)), ("notifications", (2, 18)), ("dma_rings", (2, 18)), ("uncategorized", (2, 18)),
)  # fmt: skip
# per-core status counters (sysfs name) and the driver version that added them
STATUS_COUNTERS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("success", (2, 7)), ("failure", (2, 7)), ("timeout", (2, 7)), ("exec_bad_input", (2, 7)), ("hw_error", (2, 7)),
    ("execute_completed_with_error", (2, 8)), ("execute_completed_with_num_error", (2, 8)),
    ("generic_error", (2, 7)), ("execute_failed_to_queue", (2, 8)), ("hw_repairable_hbm_ue_error", (2, 23)),
)  # fmt: skip


def _mem_files(
    builder: TreeBuilder, base: str, categories: tuple[tuple[str, tuple[int, ...]], ...], ver: tuple[int, ...]
) -> dict[str, tuple[ReopenedFile, ReopenedFile]]:
    out: dict[str, tuple[ReopenedFile, ReopenedFile]] = {}
    for name, since in categories:
        if ver >= since:
            d = builder.make(f"{base}/{name}")
            builder.write(f"{d}/present", b"0\n")
            out[name] = (
                ReopenedFile(builder.new(f"{d}/total"), b"0\n"),
                ReopenedFile(builder.new(f"{d}/peak"), b"0\n"),
            )
    return out


def write_host_files(
    root: Path, shape: Shape, driver: str, default_lnc: int, builder: TreeBuilder | None = None
) -> None:
    """The host's own files: driver version, DMI product name, UltraServer attributes, the LNC file when it differs
    from the default, and the ``proc`` and ``run/neuron-sim`` directories."""
    builder = builder or TreeBuilder()
    top = str(root)
    builder.write(f"{top}/sys/module/neuron/version", driver + "\n")
    builder.write(f"{top}/sys/class/dmi/id/product_name", shape.name + "\n")
    for name, value in shape.ultraserver_files.items():
        builder.write(f"{top}/{SYSFS_CLASS}/{name}", value)
    if shape.lnc != default_lnc:
        builder.write(f"{top}/opt/aws/neuron/logical_nc_config", f"NEURON_LOGICAL_NC_CONFIG={shape.lnc}\n")
    builder.make(f"{top}/proc")
    builder.make(f"{top}/run/neuron-sim")
