"""Copying what the daemon reads below a root into an archive, within caps, never leaving the root.

`Collector` gathers archive members: regular files (each read through `RootFS`: opened with O_NONBLOCK inside
the root, regular files only, up to `FILE_CAP` bytes, a larger one skipped and named), directories, and symlinks
whose target stays inside the root (a link that leads out of it is named, never followed or stored). `walk`
lists a subtree entry by entry (``os.scandir`` on a descriptor opened inside the root, never a whole listing of
a huge directory held at once) up to `MAX_DEPTH`, `MAX_ENTRIES` entries seen and the deadline; the archive as a
whole stops growing at `TOTAL_CAP` bytes of content and `MAX_MEMBERS` members. Whatever was left out is listed,
with why, in ``capture/skipped.txt``.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import time
from dataclasses import dataclass, field

from neuron_monitor.host.rootfs import RootFS

FILE_CAP = 1024 * 1024  # bytes of one file; no sysfs or procfs file the daemon reads comes near it
TOTAL_CAP = 96 * 1024 * 1024  # bytes of content in the whole archive (before compression)
MAX_MEMBERS = 60_000  # files, links and directories
MAX_ENTRIES = 200_000  # directory entries looked at in all walks
MAX_DIR_ENTRIES = 4096  # entries looked at in one directory (a sysfs directory holds a few dozen), so one huge
# directory cannot use up the caps before its siblings are read
MAX_DEPTH = 12
MAX_SKIPPED_NOTES = 200
# Files a walk never copies, by name: they name the host, and no reader of ours opens them. An EFA adapter's
# ``node_desc`` is its RDMA node description, which rdma-ndd sets to the host name and the device name.
NAMES_THE_HOST = {"node_desc": "the RDMA node description names the host (rdma-ndd writes the host name)"}


@dataclass
class Member:
    kind: str  # "file", "dir", "link"
    data: bytes = b""
    target: str = ""  # a link's target, as stored (relative)


@dataclass
class Collector:
    root: RootFS
    deadline: float  # time.monotonic() after which nothing more is read
    members: dict[str, Member] = field(default_factory=dict)  # archive path -> member, in order added
    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0
    content_bytes: int = 0
    entries_seen: int = 0

    # -- bookkeeping ----------------------------------------------------------------------------------------
    def skip(self, rel: str, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED_NOTES:
            self.skipped.append(f"{rel}: {why}")

    def full(self) -> str:
        """Why nothing more can be added ("" while there is room)."""
        if time.monotonic() > self.deadline:
            return "the capture's time budget ran out"
        if len(self.members) >= MAX_MEMBERS:
            return f"the archive holds {MAX_MEMBERS} members (its cap)"
        if self.content_bytes >= TOTAL_CAP:
            return f"the archive holds {TOTAL_CAP} bytes (its cap)"
        return ""

    def _dirs(self, rel: str) -> None:
        parent = posixpath.dirname(rel)
        while parent and parent not in self.members:
            self.members[parent] = Member("dir")
            parent = posixpath.dirname(parent)

    # -- members ------------------------------------------------------------------------------------------
    def add_bytes(self, rel: str, data: bytes) -> bool:
        """A file made by the capture itself (not read from the root)."""
        why = self.full()
        if why:
            self.skip(rel, why)
            return False
        if self.content_bytes + len(data) > TOTAL_CAP:
            self.skip(rel, f"{len(data)} bytes would pass the archive's cap of {TOTAL_CAP}")
            return False
        self._dirs(rel)
        self.members[rel] = Member("file", data)
        self.content_bytes += len(data)
        return True

    def add_own(self, rel: str, data: bytes) -> None:
        """One of the capture's own small files (``capture/``): added whatever the caps (they are bounded)."""
        self._dirs(rel)
        self.members[rel] = Member("file", data)
        self.content_bytes += len(data)

    def add_file(self, rel: str) -> bool:
        """Regular file ``rel`` of the root, read within the caps; False (and noted) when it is not added."""
        if rel in self.members:
            return True
        why = self.full()
        if why:
            self.skip(rel, why)
            return False
        try:
            fd = self.root.open_regular(rel)
        except OSError as e:
            if e.errno != errno.ENOENT:
                self.skip(rel, e.strerror or str(e))
            return False
        try:
            data = os.pread(fd, FILE_CAP + 1, 0)
        except OSError as e:
            self.skip(rel, e.strerror or str(e))
            return False
        finally:
            os.close(fd)
        if len(data) > FILE_CAP:
            self.skip(rel, f"larger than the per-file cap of {FILE_CAP} bytes")
            return False
        return self.add_bytes(rel, data)

    def add_link(self, rel: str, target: str) -> bool:
        """Symlink ``rel`` -> ``target``, kept only when it is relative and stays inside the root."""
        if rel in self.members:
            return True
        if target.startswith("/"):
            self.skip(rel, f"an absolute link ({target[:80]}): not stored")
            return False
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if resolved.startswith("../") or resolved == ".." or resolved.startswith("/"):
            self.skip(rel, f"a link out of the root ({target[:80]}): not stored")
            return False
        why = self.full()
        if why:
            self.skip(rel, why)
            return False
        self._dirs(rel)
        self.members[rel] = Member("link", target=target)
        return True

    def add_dir(self, rel: str) -> None:
        if rel and rel not in self.members and not self.full():
            self._dirs(rel)
            self.members[rel] = Member("dir")

    # -- reading the root ----------------------------------------------------------------------------------
    def lstat(self, rel: str) -> tuple[int, str] | None:
        """(mode, link target or "") of ``rel`` itself (not following a last-component link), inside the root."""
        try:
            fd = self.root.open_fd(rel, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            mode = os.fstat(fd).st_mode
            target = os.readlink("", dir_fd=fd) if stat.S_ISLNK(mode) else ""
        except OSError:
            return None
        finally:
            os.close(fd)
        return mode, target

    def link(self, rel: str) -> str | None:
        """If ``rel`` is a symlink: store it (when it stays inside the root) and return the root-relative path
        it names; None when it is not a link."""
        got = self.lstat(rel)
        if got is None or not stat.S_ISLNK(got[0]):
            return None
        target = got[1]
        self.add_link(rel, target)
        if target.startswith("/"):
            return posixpath.normpath(target.lstrip("/"))
        return posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))

    def walk(self, top: str, depth: int = 0) -> None:
        """Every regular file, directory and inside link below directory ``top`` (links are stored, not followed)."""
        if depth > MAX_DEPTH:
            self.skip(top, f"deeper than {MAX_DEPTH} levels")
            return
        try:
            fd = self.root.open_fd(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENOENT:
                self.skip(top, e.strerror or str(e))
            return
        self.add_dir(top)
        subdirs: list[str] = []
        try:
            with os.scandir(fd) as it:
                for k, entry in enumerate(it):
                    if k == MAX_DIR_ENTRIES:
                        self.skip(top, f"more than {MAX_DIR_ENTRIES} entries in one directory: the rest left out")
                        break
                    self.entries_seen += 1
                    if self.entries_seen > MAX_ENTRIES:
                        self.skip(top, f"more than {MAX_ENTRIES} directory entries seen in all: listing stopped")
                        return
                    why = self.full()
                    if why:
                        self.skip(top, why)
                        return
                    rel = f"{top}/{entry.name}"
                    try:
                        mode = entry.stat(follow_symlinks=False).st_mode
                    except OSError as e:
                        self.skip(rel, e.strerror or str(e))
                        continue
                    if stat.S_ISLNK(mode):
                        self.add_link(rel, os.readlink(entry.name, dir_fd=fd))
                    elif stat.S_ISDIR(mode):
                        subdirs.append(rel)
                    elif entry.name in NAMES_THE_HOST:
                        self.skip(rel, f"left out: {NAMES_THE_HOST[entry.name]}, and neuron-monitor never reads it")
                    elif stat.S_ISREG(mode):
                        self.add_file(rel)
                    else:
                        self.skip(rel, "not a regular file (a FIFO, device or socket is never read)")
        finally:
            os.close(fd)
        for sub in sorted(subdirs):
            self.walk(sub, depth + 1)
