"""Access to one Neuron device's process list and data blocks: ioctl + mmap on a real device, files under the sim.

`open_device(root, index)` looks at ``<root>/dev/neuronN``: a character device gets `IoctlDevice` (opened
O_RDWR, GET_ALL_APPS_INFO and ACQUIRE_NEURON_DS ioctls, read-only mmap of the slab at the returned offset); a
regular file with ``<root>/dev/neuron-sim/neuronN.ioctl`` beside it gets `SimFileDevice`, which reads the same
bytes from the file and maps the same slab offsets from the regular file. A regular file can shrink under its
mappings (a character device cannot): reading a mapped page past the new end would kill the process with SIGBUS,
so `SimFileDevice.list_apps` (called before every read of the device's blocks) checks the file still covers
every block it mapped, and fails as the device's error when it does not. Both return the same `AppInfo` lists
and the same mmap objects, so the parsers above them are the same code.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import stat
from pathlib import Path
from typing import Protocol

from neuron_monitor.host.rootfs import KeptFile, RootFS
from neuron_monitor.neuron import layout as L
from neuron_monitor.neuron.appsinfo import AppInfo, parse_acquire_table, parse_apps_info


class DeviceIO(Protocol):
    index: int

    def list_apps(self) -> list[AppInfo]: ...

    def acquire(self, pid: int) -> tuple[int, int] | None: ...

    def map_block(self, offset: int, size: int) -> mmap.mmap: ...

    def close(self) -> None: ...


class IoctlDevice:
    """A real /dev/neuronN (not exercised on this machine: written against the driver's documented structures)."""

    def __init__(self, index: int, path: str) -> None:
        self.index = index
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)  # attaches us; needed by both ioctls
        self._last: tuple[bytes | None, list[AppInfo]] = (None, [])  # the last answer and its parse

    def list_apps(self) -> list[AppInfo]:
        """The attached processes (the same list object while the driver's answer is unchanged)."""
        buf = bytearray(L.APPS_INFO_HEADER.size + L.NDS_SLOTS * L.APP_INFO.size)
        L.APPS_INFO_HEADER.pack_into(buf, 0, L.APP_INFO_ALL, L.NDS_SLOTS, 0)
        fcntl.ioctl(self.fd, L.IOCTL_GET_ALL_APPS_INFO, buf, True)
        answer = bytes(buf)
        if answer != self._last[0]:
            me = os.getpid()
            self._last = (answer, [a for a in parse_apps_info(answer) if a.pid != me])
        return self._last[1]

    def acquire(self, pid: int) -> tuple[int, int] | None:
        buf = bytearray(L.ACQUIRE_DS.size)
        L.ACQUIRE_DS.pack_into(buf, 0, pid, 0, 0)
        try:
            fcntl.ioctl(self.fd, L.IOCTL_ACQUIRE_NEURON_DS, buf, True)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ESRCH, errno.EINVAL):
                return None  # not a runtime: no datastore
            raise
        _pid, offset, size = L.ACQUIRE_DS.unpack_from(buf, 0)
        return offset, size

    def map_block(self, offset: int, size: int) -> mmap.mmap:
        return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ, offset=offset)

    def close(self) -> None:
        os.close(self.fd)


class SimFileDevice:
    """The simulator's /dev/neuronN (a regular file of slabs) and its ioctl stand-in file."""

    def __init__(self, index: int, path: str, ioctl_path: str) -> None:
        self.index = index
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._ioctl = KeptFile(Path(ioctl_path), L.SIM_IOCTL_FILE_SIZE + 1)
        self._acquire: dict[int, tuple[int, int]] = {}
        self._last: tuple[int | None, list[AppInfo]] = (None, [])  # the last generation and its parse
        self._mapped_end = 0  # the end of the furthest block mapped from the file

    def list_apps(self) -> list[AppInfo]:
        """The attached processes (the same list object while the file's generation is unchanged: the simulator
        bumps it with every write, so the old bytes need not be compared). OSError when the file no longer
        covers the blocks mapped from it."""
        size = os.fstat(self.fd).st_size
        if size < self._mapped_end:
            raise OSError(
                errno.EIO, f"the device file shrank to {size} bytes under data blocks mapped up to {self._mapped_end}"
            )
        for _ in range(5):
            data = self._ioctl.read()
            if len(data) < L.SIM_IOCTL_FILE_SIZE:
                raise OSError(errno.EIO, f"short ioctl file ({len(data)} bytes)")
            generation = L.SIM_GENERATION.unpack_from(data, 0)[0]
            if generation != L.SIM_GENERATION.unpack_from(data, L.SIM_TRAILER_OFFSET)[0]:
                continue  # torn: the simulator was writing it
            if generation != self._last[0]:
                self._acquire = parse_acquire_table(data, L.SIM_ACQUIRE_OFFSET, L.NDS_SLOTS)
                self._last = (generation, parse_apps_info(data, L.SIM_APPS_OFFSET))
            return self._last[1]
        raise OSError(errno.EAGAIN, "ioctl file kept changing while read")

    def acquire(self, pid: int) -> tuple[int, int] | None:
        return self._acquire.get(pid)

    def map_block(self, offset: int, size: int) -> mmap.mmap:
        """A read-only mapping of ``size`` bytes at ``offset``; ValueError (from mmap) past the file's end."""
        mapping = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ, offset=offset)
        self._mapped_end = max(self._mapped_end, offset + size)
        return mapping

    def close(self) -> None:
        self._ioctl.close()
        os.close(self.fd)


def open_device(root: RootFS, index: int) -> DeviceIO:
    """The device access for ``<root>/dev/neuron<index>``; OSError if it is absent or unusable."""
    path = root.path(f"dev/neuron{index}")
    st = os.stat(path)
    if stat.S_ISCHR(st.st_mode):
        return IoctlDevice(index, str(path))
    sim = root.path(f"{L.SIM_IOCTL_DIR}/neuron{index}.ioctl")
    if stat.S_ISREG(st.st_mode) and sim.exists():
        return SimFileDevice(index, str(path), str(sim))
    raise OSError(errno.ENODEV, f"{path} is neither a Neuron character device nor a simulated one")
