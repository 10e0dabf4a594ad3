"""Access to one Neuron device's process list and data blocks: ioctl + mmap on a real device, files under the sim.

`open_device(root, index)` looks at ``<root>/dev/neuronN`` (resolved as every file under the root, unopened until
it is known to be a node named ``neuronN``): a character device gets `IoctlDevice` (opened
O_RDWR, GET_ALL_APPS_INFO and ACQUIRE_NEURON_DS ioctls, read-only mmap of the slab at the returned offset); a
regular file with ``<root>/dev/neuron-sim/neuronN.ioctl`` beside it gets `SimFileDevice`, which reads the same
bytes from the file. Each device hands out its data blocks as `Block` objects whose ``read()`` returns the block's
current bytes as a buffer, so the parsers above them are the same code:

- a character device's block is its mmap (zero copy; the driver's slab cannot shrink under the mapping);
- a regular file's block is read with one ``pread`` into a buffer kept per block at each ``read()`` (the
  application source asks for the bytes a parser reads, ``NDS_END``). A regular file can be truncated at any
  moment, and a mapped page past the new end would kill the process with SIGBUS at its next access whatever was
  checked before it; a pread cannot fault: a file that no longer covers the block is a short read, reported as the
  block's OSError. The copy costs a few microseconds per block and collection (67,200 bytes from the page cache).
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
from neuron_monitor.util import fdlimit


class Block(Protocol):
    """One process's data block on a device."""

    def read(self) -> mmap.mmap | bytearray:
        """The block's bytes now (the same buffer object each time); OSError when they cannot be read."""
        ...

    def close(self) -> None: ...


class DeviceIO(Protocol):
    index: int

    def list_apps(self) -> list[AppInfo]: ...

    def acquire(self, pid: int) -> tuple[int, int] | None: ...

    def map_block(self, offset: int, size: int) -> Block: ...

    def close(self) -> None: ...


MAX_BLOCK_END = 1 << 48  # no device file or mapping reaches this far (the driver's offsets are a few MiB)


def check_block_place(offset: int, size: int) -> None:
    """ValueError unless a data block of ``size`` bytes at ``offset`` (the ACQUIRE answer's, or a replayed
    capture's stand-in file's) can be read: a negative or empty one, or one past any file, whose offset the system
    calls cannot even take (an OverflowError there was not one application's error: it ended the whole listing)."""
    if offset < 0 or size <= 0 or offset + size > MAX_BLOCK_END:
        raise ValueError(f"data block at {offset} of {size} bytes")


class MappedBlock:
    """A block of a character device: its read-only mapping, read in place."""

    __slots__ = ("mapping",)

    def __init__(self, mapping: mmap.mmap) -> None:
        self.mapping = mapping

    def read(self) -> mmap.mmap:
        return self.mapping

    def close(self) -> None:
        self.mapping.close()


class _SharedFd:
    """A descriptor shared by a device and its blocks, closed when the last of them is: a block outlives its
    device's removal (its final counts are read after the driver stopped listing the device), as a mapping does."""

    __slots__ = ("fd", "users")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 1

    def take(self) -> _SharedFd:
        self.users += 1
        return self

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            os.close(self.fd)
            self.fd = -1


class FileBlock:
    """A block of a regular file, copied into a kept buffer by one pread per `read` (cannot fault, see above)."""

    __slots__ = ("_buf", "_file", "_offset")

    def __init__(self, file: _SharedFd, offset: int, size: int) -> None:
        self._file: _SharedFd | None = file.take()
        self._offset = offset
        self._buf = bytearray(size)

    def read(self) -> bytearray:
        if self._file is None:
            raise OSError(errno.EBADF, "data block closed")
        got = os.preadv(self._file.fd, (self._buf,), self._offset)
        if got < len(self._buf):
            raise OSError(
                errno.EIO,
                f"the device file shrank: it ends inside the data block at {self._offset} "
                f"({got} of {len(self._buf)} bytes there)",
            )
        return self._buf

    def close(self) -> None:
        if self._file is not None:
            self._file.release()
            self._file = None


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

    def map_block(self, offset: int, size: int) -> MappedBlock:
        check_block_place(offset, size)
        return MappedBlock(mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ, offset=offset))

    def close(self) -> None:
        os.close(self.fd)


class SimFileDevice:
    """The simulator's /dev/neuronN (a regular file of slabs) and its ioctl stand-in file."""

    def __init__(self, index: int, path: str, ioctl_path: str, ioctl: KeptFile | None = None) -> None:
        """``ioctl``: the stand-in file as a root opens it (inside the root); else ``ioctl_path`` as it is."""
        self.index = index
        self._file = _SharedFd(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        self._ioctl = ioctl if ioctl is not None else KeptFile(Path(ioctl_path), L.SIM_IOCTL_FILE_SIZE + 1)
        self._acquire: dict[int, tuple[int, int]] = {}
        self._last: tuple[int | None, list[AppInfo]] = (None, [])  # the last generation and its parse

    def list_apps(self) -> list[AppInfo]:
        """The attached processes (the same list object while the file's generation is unchanged: the simulator
        bumps it with every write, so the old bytes need not be compared)."""
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

    def map_block(self, offset: int, size: int) -> FileBlock:
        """The block of ``size`` bytes at ``offset`` (the application source asks for the parsers' part,
        ``NDS_END`` bytes, which each `FileBlock.read` copies)."""
        check_block_place(offset, size)
        return FileBlock(self._file, offset, size)

    def close(self) -> None:
        self._ioctl.close()
        self._file.release()


def open_device(root: RootFS, index: int) -> DeviceIO:
    """The device access for ``<root>/dev/neuron<index>``; OSError if it is absent or unusable, `OutOfDescriptors`
    (not an OSError: the device is there) when no descriptor is left to open it."""
    try:
        return _open_device(root, index)
    except OSError as e:
        fdlimit.check(e, root.where(f"dev/neuron{index}"))
        raise


def device_node(root: RootFS, index: int) -> tuple[int, int]:
    """An O_PATH descriptor of ``<root>/dev/neuronN`` (found as every file under the root is: inside it, or a link
    into the host's own /dev) and its mode; the caller opens the very node through ``/proc/self/fd`` (no second
    lookup) and closes the descriptor. OSError ENODEV when the path leads to a node not named ``neuronN`` (a link to
    another device is never opened nor sent the driver's ioctls: opening a watchdog arms it), or to a character
    device whose numbers are not the driver's device N (`_check_numbers`)."""
    rel = f"dev/neuron{index}"
    probe = root.open_fd(rel, os.O_PATH | os.O_CLOEXEC)
    try:
        real = os.readlink(f"/proc/self/fd/{probe}")
        if os.path.basename(real) != f"neuron{index}":
            raise OSError(errno.ENODEV, f"{root.where(rel)} leads to {real[:120]}, not a Neuron device node")
        st = os.fstat(probe)
        if stat.S_ISCHR(st.st_mode):
            _check_numbers(root, rel, index, st.st_rdev)
        return probe, st.st_mode
    except BaseException:
        os.close(probe)
        raise


def neuron_major(root: RootFS) -> int | None:
    """The character-device major number the Neuron driver registered (its ``neuron`` line under "Character
    devices:" in ``<root>/proc/devices``: the driver allocates its region with that name), or None when the file
    cannot be read or names no such driver."""
    try:
        text = root.read_text("proc/devices")
    except OSError:
        return None
    in_char = False
    for line in text.splitlines():
        if line.endswith(":"):
            in_char = line == "Character devices:"
            continue
        fields = line.split()
        if in_char and len(fields) == 2 and fields[1] == "neuron" and fields[0].isdigit():
            return int(fields[0])
    return None


def _check_numbers(root: RootFS, rel: str, index: int, rdev: int) -> None:
    """A character device named neuronN is the driver's device N: its major is the driver's and its minor the
    device's index (the driver numbers its nodes so). Checked when ``proc/devices`` names the driver; OSError
    ENODEV otherwise (a node made with mknod under another driver's numbers is never opened)."""
    major = neuron_major(root)
    got = (os.major(rdev), os.minor(rdev))
    if major is not None and got != (major, index):
        raise OSError(
            errno.ENODEV,
            f"{root.where(rel)} is character device {got[0]}:{got[1]}, not the Neuron driver's {major}:{index}",
        )


def _open_device(root: RootFS, index: int) -> DeviceIO:
    probe, mode = device_node(root, index)
    try:
        if stat.S_ISCHR(mode):
            return IoctlDevice(index, f"/proc/self/fd/{probe}")
        sim = f"{L.SIM_IOCTL_DIR}/neuron{index}.ioctl"
        if stat.S_ISREG(mode) and root.exists(sim):  # read inside the root, as every file under it
            ioctl = root.open_kept(sim, L.SIM_IOCTL_FILE_SIZE + 1)
            return SimFileDevice(index, f"/proc/self/fd/{probe}", root.where(sim), ioctl)
    finally:
        os.close(probe)
    raise OSError(
        errno.ENODEV, f"{root.where(f'dev/neuron{index}')} is neither a Neuron character device nor a simulated one"
    )
