"""The one file-system root every read goes through (`--root`, like node_exporter's --path.rootfs).

`RootFS("/host").path("proc/stat")` is `/host/proc/stat`. `KeptFile` keeps a descriptor open and re-reads it
with pread at offset 0, which is how sysfs and procfs attributes are meant to be polled and costs about half of
an open/read/close cycle. Between `begin_collection()` and `end_collection()` (the scheduler brackets each
collection with them) `listdir` lists each directory once, so that readers which each need the device listing
(the application snapshot, neuron_hw_counters) see the same one and pay for one.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_REOPEN_ERRNOS = {errno.ENOENT, errno.ESTALE, errno.ENODEV, errno.EBADF, errno.ENXIO}


class RootFS:
    """Resolves absolute host paths below one root directory."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self._listings: dict[str, list[str] | OSError] | None = None  # within a collection: rel -> listing

    def begin_collection(self) -> None:
        self._listings = {}

    def end_collection(self) -> None:
        self._listings = None

    def listdir(self, rel: str) -> list[str]:
        """The names in directory ``rel``; within a collection, its first listing (or error) again."""
        memo = self._listings
        if memo is None:
            return os.listdir(self.path(rel))
        got = memo.get(rel)
        if got is None:
            try:
                got = memo[rel] = os.listdir(self.path(rel))
            except OSError as e:
                got = memo[rel] = e
        if isinstance(got, OSError):
            raise got
        return got

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read_bytes(self, rel: str) -> bytes:
        with open(self.path(rel), "rb", buffering=0) as f:
            return f.read()

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8", "replace")

    def open_kept(self, rel: str) -> KeptFile:
        return KeptFile(self.path(rel))

    def __repr__(self) -> str:
        return f"RootFS({str(self.root)!r})"


class KeptFile:
    """A file read again and again through one descriptor (pread from offset 0 until EOF).

    If the file was replaced or vanished (the descriptor went stale), it is reopened once per read.
    """

    __slots__ = ("_bufsize", "_fd", "path")

    def __init__(self, path: Path, bufsize: int = 65536) -> None:
        self.path = path
        self._fd: int | None = None
        self._bufsize = bufsize

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
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
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
