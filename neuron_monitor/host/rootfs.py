"""The one file-system root every read goes through (`--root`, like node_exporter's --path.rootfs).

`RootFS("/host").path("proc/stat")` is `/host/proc/stat`. `KeptFile` keeps a descriptor open and re-reads it
with pread at offset 0, which is how sysfs and procfs attributes are meant to be polled and costs about half of
an open/read/close cycle. Between `begin_collection()` and `end_collection()` (the scheduler brackets each
collection with them) `listdir` lists each directory once, so that readers which each need the device listing
(the application snapshot, neuron_hw_counters) see the same one and pay for one. A reader may also accept a
listing up to ``max_age`` seconds old (`listdir`'s argument; the device listing takes one second, see
neuron/sysfs.py): when the collection was begun with the collector's clock reading, such a listing is kept across
collections until it is that old, or until a reader drops it (`forget_listing`) after a read failed.

Confinement: below a root other than ``/``, every open and listing resolves *inside* the root, as if the root were
``/``: an absolute symlink such as ``<root>/sys/class/dmi/id/product_name -> /etc/hosts`` resolves to
``<root>/etc/hosts``, and ``..`` stops at the root. This is the kernel's openat2(2) RESOLVE_IN_ROOT (Linux 5.6+,
https://man7.org/linux/man-pages/man2/openat2.2.html), called through libc's syscall(); on an older kernel the same
resolution is done component by component (`resolve_in_root`). Every file is opened with O_NONBLOCK, must be a
regular file (a FIFO or /dev/zero planted under the root is an error, not a hang or a flood) and is read up to
READ_LIMIT bytes. An open or listing that fails because no descriptor is left raises
`neuron_monitor.util.fdlimit.OutOfDescriptors` (not an OSError, so no reader takes it for a missing file). One
exception keeps roots built from links working: a path below ``proc``, ``sys`` or ``dev``
may resolve into the host's own tree of that name (a root made of ``proc -> /proc`` links, or the simulator's
``proc/PID -> /proc/PID``); the target's real path is checked to lie there before it is opened (it is looked at
with O_PATH, then that very file opened through ``/proc/self/fd``), and a device, FIFO or socket there is refused
unopened: opening a device can act (a watchdog opened is armed).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from neuron_monitor.util import fdlimit
from neuron_monitor.util.inputfile import read_capped

_REOPEN_ERRNOS = {errno.ENOENT, errno.ESTALE, errno.ENODEV, errno.EBADF, errno.ENXIO}
READ_LIMIT = 16 * 1024 * 1024  # no procfs or sysfs file the daemon reads comes near this
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64 (the unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_MAX_SYMLINKS = 40
_OPENAT2_TRIES = 8  # openat2 RESOLVE_IN_ROOT fails with EAGAIN when any rename or mount on the host raced a
# ".." step of the resolution (sysfs class links are relative: ../../devices/...); the man page says to retry
_PSEUDO_TOPS = ("proc", "sys", "dev")  # host pseudo-filesystems a root may link in (see RootFS.open_fd)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_openat2_works: bool | None = None  # unknown until tried once
_HOW_SIZE = ctypes.sizeof(_OpenHow)
_hows: dict[int, _OpenHow] = {}  # open flags -> its open_how (a daemon uses a handful of flag sets)


def _openat2_in_root(dirfd: int, rel: str, flags: int) -> int | None:
    """openat2(dirfd, rel, RESOLVE_IN_ROOT); None when the kernel has no openat2, or when renames or mounts elsewhere
    on the host made it answer EAGAIN at every try (the caller then resolves the path itself)."""
    global _openat2_works
    if _openat2_works is False:
        return None
    how = _hows.get(flags)
    if how is None:
        how = _hows[flags] = _OpenHow(flags, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    path = os.fsencode(rel)
    for _ in range(_OPENAT2_TRIES):
        fd = int(_libc.syscall(_SYS_OPENAT2, dirfd, path, ctypes.byref(how), _HOW_SIZE))
        if fd >= 0:
            _openat2_works = True
            return fd
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            break
    else:  # a rename or mount somewhere on the host raced every try: the caller resolves it as without openat2
        return None
    if err in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:  # no openat2, or a seccomp filter refuses it
        _openat2_works = False
        return None
    raise OSError(err, os.strerror(err), rel)


def resolve_in_root(root: str, rel: str) -> str:
    """The host path of ``rel`` below ``root`` with every symlink resolved inside the root (the fallback for
    kernels without openat2): absolute targets restart at the root, ``..`` never climbs above it."""
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    todo.reverse()
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop()
        if part == "..":
            if done:
                done.pop()
            continue
        here = os.path.join(root, *done, part)
        try:
            st = os.lstat(here)
        except OSError:
            done.append(part)  # does not exist (yet): the open reports it
            continue
        if not stat.S_ISLNK(st.st_mode):
            done.append(part)
            continue
        links += 1
        if links > _MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
        target = os.readlink(here)
        if target.startswith("/"):
            done = []
        todo.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
    return os.path.join(root, *done)


def _reopen(probe: int, flags: int, path: str) -> int:
    """The file an O_PATH descriptor names, opened with ``flags`` (the very file checked: no second resolution),
    unless it is a device, FIFO or socket, which is refused unopened. ``probe`` is closed."""
    try:
        mode = os.fstat(probe).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket is never read)", path)
        return os.open(f"/proc/self/fd/{probe}", flags)
    finally:
        os.close(probe)


def check_regular(fd: int, path: object) -> None:
    """Raise OSError (and close ``fd``) unless ``fd`` is a regular file."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket is never read)", str(path))


class RootFS:
    """Resolves absolute host paths below one root directory."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self._prefix = os.path.join(os.fspath(self.root), "")  # "<root>/": paths as strings, no pathlib per file
        self._listings: dict[str, list[str] | OSError] | None = None  # within a collection: rel -> listing
        self._kept_listings: dict[str, tuple[float, list[str] | OSError]] = {}  # rel -> (listed at, listing)
        self._now: float | None = None  # the clock reading the current collection began with, if given
        self.confined = os.path.realpath(self.root) != "/"  # below "/" itself there is nothing to escape to
        self._root_fd: int | None = None

    def open_fd(self, rel: str, flags: int = _OPEN_FLAGS) -> int:
        """A descriptor for ``rel``, resolved inside the root (see the module docstring); OSError otherwise, and
        `OutOfDescriptors` (not an OSError: not a missing file) when no descriptor is left."""
        try:
            return self._open_fd(rel, flags)
        except OSError as e:
            fdlimit.check(e, self.where(rel))
            raise

    def _open_fd(self, rel: str, flags: int) -> int:
        if not self.confined:
            return os.open(self.where(rel), flags)
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        inner = rel.lstrip("/") or "."
        try:
            fd = _openat2_in_root(self._root_fd, inner, flags)
            if fd is None:
                fd = os.open(resolve_in_root(os.fspath(self.root), inner), flags)
        except OSError as e:
            if fdlimit.exhausted(e):
                raise
            fd = self._open_linked_pseudo_fs(inner, flags)
            if fd is None:
                raise
        return fd

    def _open_linked_pseudo_fs(self, rel: str, flags: int) -> int | None:
        """The one way out of the root: a root whose ``proc``, ``sys`` or ``dev`` (or one of their entries, as the
        simulator's ``proc/PID``) links to the host's own tree of the same name. The path is opened as the
        symlinks say and kept only if the opened file's real path lies in that same host tree."""
        top = rel.split("/", 1)[0]
        if top not in _PSEUDO_TOPS:
            return None
        try:  # a path only: the target is not opened before it is known (opening a device can act, e.g. a watchdog)
            fd = os.open(self.path(rel), os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = ""
        if real == f"/{top}" or real.startswith(f"/{top}/"):
            return fd if flags & os.O_PATH else _reopen(fd, flags, self.where(rel))
        os.close(fd)
        root = os.path.realpath(self.root)
        if real.startswith(f"{root}/"):
            return None  # the path opened inside the root: the confined open's own error is the true one
        raise OSError(errno.EXDEV, f"resolves outside --root (to {real[:120]})", str(self.path(rel)))

    def open_regular(self, rel: str) -> int:
        """`open_fd` for reading, refusing anything but a regular file."""
        fd = self.open_fd(rel)
        check_regular(fd, self.where(rel))
        return fd

    def _list(self, rel: str) -> list[str]:
        if not self.confined:
            try:
                return os.listdir(self.where(rel))
            except OSError as e:
                fdlimit.check(e, self.where(rel))
                raise
        fd = self.open_fd(rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return os.listdir(fd)  # fdopendir needs a descriptor of its own
        except OSError as e:
            fdlimit.check(e, self.where(rel))
            raise
        finally:
            os.close(fd)

    def exists(self, rel: str) -> bool:
        """True when ``rel`` exists inside the root."""
        try:
            os.close(self.open_fd(rel, os.O_PATH | os.O_CLOEXEC))
        except OSError:
            return False
        return True

    def is_dir(self, rel: str) -> bool:
        """True when ``rel`` is a directory inside the root."""
        try:
            os.close(self.open_fd(rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            return False
        return True

    def begin_collection(self, now: float | None = None) -> None:
        """A collection starts: each directory is listed at most once until `end_collection`. With ``now`` (the
        collector's clock), listings asked for with a ``max_age`` are also kept across collections."""
        self._listings = {}
        self._now = now

    def end_collection(self) -> None:
        self._listings = None
        self._now = None

    def listdir(self, rel: str, max_age: float = 0.0) -> list[str]:
        """The names in directory ``rel``; within a collection, its first listing (or error) again. With
        ``max_age`` and a collection begun with a clock reading, a listing (or error) taken by an earlier
        collection less than ``max_age`` seconds before this one's start is returned again (the same list)."""
        memo = self._listings
        if memo is None:
            return self._list(rel)
        got = memo.get(rel)
        if got is None:
            now = self._now
            kept = self._kept_listings.get(rel) if max_age > 0.0 and now is not None else None
            if kept is not None and now is not None and 0.0 <= now - kept[0] < max_age:
                got = kept[1]
            else:
                got = self._list_or_error(rel)
                if max_age > 0.0 and now is not None:
                    self._kept_listings[rel] = (now, got)
            memo[rel] = got
        if isinstance(got, OSError):
            raise got.with_traceback(None)  # raised again and again: no traceback piling up on it
        return got

    def _list_or_error(self, rel: str) -> list[str] | OSError:
        try:
            return self._list(rel)
        except OSError as e:
            return e

    def forget_listing(self, rel: str) -> None:
        """List ``rel`` again at the next collection (a reader saw something in it fail), however recent the
        kept listing is; the current collection keeps the view it has."""
        self._kept_listings.pop(rel, None)

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def where(self, rel: str) -> str:
        """`path` as a string, cheaply (no normalisation): for opening outside the root's confinement and for
        messages."""
        return self._prefix + rel.lstrip("/")

    def read_bytes(self, rel: str) -> bytes:
        """The content of regular file ``rel`` (at most READ_LIMIT bytes)."""
        fd = self.open_regular(rel)
        try:
            return read_capped(fd, READ_LIMIT, self.where(rel))
        finally:
            os.close(fd)

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8", "replace")

    def open_kept(self, rel: str, bufsize: int = 65536) -> KeptFile:
        """A `KeptFile` for ``rel``, opened (inside the root, regular files only) at its first read."""
        return KeptFile(self.where(rel), bufsize, lambda: self.open_regular(rel))

    def open_kept_if_exists(self, rel: str, bufsize: int = 65536) -> KeptFile | None:
        """A `KeptFile` for ``rel`` opened now, or None when ``rel`` does not exist. One open where ``exists`` then
        `open_kept` take two; something there that cannot be opened for reading (not a regular file, no
        permission) still gives a `KeptFile`, whose reads report why."""
        try:
            fd = self.open_regular(rel)
        except OSError:
            return self.open_kept(rel, bufsize) if self.exists(rel) else None
        return KeptFile(self.where(rel), bufsize, lambda: self.open_regular(rel), fd)

    def close(self) -> None:
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def __repr__(self) -> str:
        return f"RootFS({str(self.root)!r})"


class KeptFile:
    """A file read again and again through one descriptor (pread from offset 0 until EOF).

    If the file was replaced or vanished (the descriptor went stale), it is reopened once per read. ``opener``
    (from `RootFS.open_kept`) opens it inside the root; without one the path is opened as it is. Either way only a
    regular file is read, at most READ_LIMIT bytes.
    """

    __slots__ = ("_bufsize", "_fd", "_opener", "_where")

    def __init__(
        self,
        path: str | os.PathLike[str],
        bufsize: int = 65536,
        opener: Callable[[], int] | None = None,
        fd: int | None = None,
    ) -> None:
        """``fd``: the file, already opened (by ``opener``, or as a regular file); else opened at the first read."""
        self._where = os.fspath(path)
        self._fd = fd
        self._bufsize = bufsize
        self._opener = opener

    @property
    def path(self) -> Path:
        return Path(self._where)

    def read(self) -> bytes:
        fd = self.fileno()
        try:
            return self._read_all(fd)
        except OSError as e:
            if e.errno not in _REOPEN_ERRNOS:
                raise
            self.close()
            return self._read_all(self.fileno())

    def fileno(self) -> int:
        """The descriptor (opened now if it is not), for a caller that batches its own preads and falls back to
        `read` on any error."""
        if self._fd is None:
            if self._opener is not None:
                self._fd = self._opener()
            else:
                try:
                    fd = os.open(self._where, _OPEN_FLAGS)
                except OSError as e:
                    fdlimit.check(e, self._where)
                    raise
                check_regular(fd, self._where)
                self._fd = fd
        return self._fd

    def _read_all(self, fd: int) -> bytes:
        chunk = os.pread(fd, self._bufsize, 0)
        if len(chunk) < self._bufsize:
            return chunk
        parts = [chunk]
        offset = len(chunk)
        while True:
            chunk = os.pread(fd, self._bufsize, offset)
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
            if offset > READ_LIMIT:
                raise OSError(errno.EFBIG, f"larger than {READ_LIMIT} bytes", self._where)
        self._bufsize = max(self._bufsize, offset + 4096)
        return b"".join(parts)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            finally:
                self._fd = None

    def __del__(self) -> None:
        self.close()
