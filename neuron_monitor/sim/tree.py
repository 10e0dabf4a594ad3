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

import os
from pathlib import Path

from neuron_monitor.neuron import layout as L
from neuron_monitor.sim.shapes import SERIAL_BASE, Shape

SYSFS_DEVICES = "sys/devices/virtual/neuron_device"
SYSFS_CLASS = "sys/class/neuron_device"


def driver_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


class InPlaceFile:
    """A file the simulator rewrites in place through one kept descriptor."""

    __slots__ = ("_last", "fd")

    def __init__(self, path: Path, content: bytes = b"") -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._last: bytes | None = None
        self.write(content)

    def write(self, content: bytes) -> None:
        if content == self._last:
            return
        os.pwrite(self.fd, content, 0)
        if self._last is None or len(content) < len(self._last):
            os.ftruncate(self.fd, len(content))
        self._last = content

    def close(self) -> None:
        os.close(self.fd)


def _write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)


class DeviceTree:
    """The sysfs and /dev files of one simulated Neuron device."""

    def __init__(self, root: Path, shape: Shape, index: int, driver: str) -> None:
        self.index = index
        ver = driver_tuple(driver)
        self.live_counters = ver >= (2, 30)
        self.dir = root / SYSFS_DEVICES / f"neuron{index}"
        stats_parent = self.dir / "metrics" if ver < (2, 8) else self.dir
        _write(self.dir / "core_count", str(shape.phys_cores))
        peers = [str((index + k) % shape.devices) for k in (1, -1)] if shape.devices > 1 else []
        _write(self.dir / "connected_devices", ", ".join(dict.fromkeys(peers)) + "\n")
        _write(self.dir / "reset", "1\n")
        _write(self.dir / "info/notify_delay", "-1\n")
        arch = self.dir / "info/architecture"
        _write(arch / "arch_type", shape.nd_arch + "\n")
        _write(arch / "instance_type", shape.instance_family + "\n")
        _write(arch / "device_name", shape.device_name + "\n")
        if shape.has_serial:
            _write(self.dir / "info/serial_number", f"{SERIAL_BASE + index:016x}\n")
        self.ecc: dict[str, InPlaceFile] = {}
        if shape.has_ecc_files:
            hw = stats_parent / "stats/hardware"
            hw.mkdir(parents=True, exist_ok=True)
            names = ["mem_ecc_uncorrected", "sram_ecc_uncorrected"]
            if ver >= (2, 23):
                _write(hw / "mem_ecc_repairable_uncorrected", "0\n")
            if ver >= (2, 30):
                names += ["mem_ecc_corrected", "sram_ecc_corrected"]
            self.ecc = {n: InPlaceFile(hw / n, b"0\n") for n in names}
        self.core_files: list[dict[str, InPlaceFile]] = []
        for k in range(shape.phys_cores):
            core = self.dir / f"neuron_core{k}"
            _write(core / "info/architecture/arch_type", shape.nc_arch + "\n")
            st = (stats_parent / f"neuron_core{k}") / "stats"
            files: dict[str, InPlaceFile] = {}
            for rel in ("other_info/nc_time_in_use", "other_info/inference_count", "other_info/flop_count",
                        "status/success", "memory_usage/device_mem"):  # fmt: skip
                (st / rel).mkdir(parents=True, exist_ok=True)
                files[rel] = InPlaceFile(st / rel / "total", b"0\n")
                if rel == "memory_usage/device_mem":
                    _write(st / rel / "peak", "0\n")
            self.core_files.append(files)
        link = root / SYSFS_CLASS / f"neuron{index}"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(self.dir, link.parent))
        # /dev/neuronN: the slabs, sparse; and the ioctl stand-in
        self.dev_path = root / "dev" / f"neuron{index}"
        self.dev_path.parent.mkdir(parents=True, exist_ok=True)
        self.dev_fd = os.open(self.dev_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.ftruncate(self.dev_fd, L.NDS_SLOTS * L.NDS_SIZE)
        self.ioctl_path = root / L.SIM_IOCTL_DIR / f"neuron{index}.ioctl"
        self.ioctl_path.parent.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        for f in self.ecc.values():
            f.close()
        for files in self.core_files:
            for f in files.values():
                f.close()
        os.close(self.dev_fd)


def write_host_files(root: Path, shape: Shape, driver: str, default_lnc: int) -> None:
    _write(root / "sys/module/neuron/version", driver + "\n")
    _write(root / "sys/class/dmi/id/product_name", shape.name + "\n")
    for name, value in shape.ultraserver_files.items():
        _write(root / SYSFS_CLASS / name, value)
    if shape.lnc != default_lnc:
        _write(root / "opt/aws/neuron/logical_nc_config", f"NEURON_LOGICAL_NC_CONFIG={shape.lnc}\n")
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "run/neuron-sim").mkdir(parents=True, exist_ok=True)
