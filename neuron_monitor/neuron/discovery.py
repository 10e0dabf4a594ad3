"""Finding the driver's nodes wherever it puts them below a device's directory (the nodes: nodes.py).

`DeviceNodes(root, "sys/class/neuron_device/neuron3")` answers `find(node)` (and `find(node, core)` for a per-core
node) with where the node is: first at its place in the device's known layout (one open, as before discovery
existed); when it is not there, by one bounded search of the device's directory, kept for every later question
until the reader forgets the device (a node vanished, the device went away and came back). Nothing is guessed:

- a node matches an entry whose name is the node's name and whose directories below the device's (below the
  core's ``neuron_coreK`` for a per-core node) include the node's defining parents in order
  (``hardware/mem_ecc_uncorrected`` matches ``stats/hardware/mem_ecc_uncorrected`` and
  ``counters/hardware/ecc/mem_ecc_uncorrected``, never ``stats/mem_ecc_uncorrected``);
- a file node matches regular files only (a FIFO or device node named like one is not a candidate), a directory
  node directories only; a device-level node never matches below a ``neuron_coreK`` directory;
- two candidates for one node make that node's problem (named in the group's ``error``), never a choice.

The search (`search`) reads at most `MAX_ENTRIES` entries, `MAX_DEPTH` directories deep, follows no symbolic link
(each directory is opened from its parent's descriptor with O_NOFOLLOW, so it cannot leave the device's directory
nor loop), and says when it stopped early; the device's directory itself is opened through the RootFS, inside
``--root``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.nodes import CORE_DIR, KNOWN_LAYOUTS, KnownLayout, Node

MAX_DEPTH = 8  # directories below the device's searched (the known layouts go 6 deep)
MAX_ENTRIES = 20_000  # entries read per device search (a trn2 device has about 700)
MAX_CANDIDATES_SHOWN = 3
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

KNOWN = "known"
DISCOVERED = "discovered"
NONE = "none"


@dataclass(frozen=True, slots=True)
class Found:
    """Where a node is: ``rel`` below the root (None: not found), ``how`` (``known:<layout>``, ``discovered``, or
    "" when not found) and, when not found, ``problem`` ("" when simply absent; else why none was used)."""

    rel: str | None
    how: str = ""
    problem: str = ""


@dataclass(slots=True)
class SearchResult:
    """What one bounded search of a device's directory found: name -> [(components below the device's directory,
    is a directory)], the physical cores (``neuron_coreK`` directories) seen, and why it stopped early ("")."""

    entries: dict[str, list[tuple[tuple[str, ...], bool]]] = field(default_factory=dict)
    cores: set[int] = field(default_factory=set)
    stopped: str = ""
    read: int = 0


def search(root: RootFS, device_rel: str, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> SearchResult:
    """Every regular file and directory below ``device_rel`` (see the module docstring for the bounds)."""
    out = SearchResult()
    try:
        fd = root.open_fd(device_rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        out.stopped = f"{device_rel} not listed: {e.strerror or e}"
        return out
    try:
        _walk(fd, (), out, max_depth, max_entries)
    finally:
        os.close(fd)
    return out


def _walk(fd: int, parts: tuple[str, ...], out: SearchResult, max_depth: int, max_entries: int) -> None:
    subdirs: list[str] = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                out.read += 1
                if out.read > max_entries:
                    out.stopped = f"search stopped after {max_entries} entries"
                    return
                try:
                    if entry.is_symlink():
                        continue
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if not is_dir and not entry.is_file(follow_symlinks=False):
                        continue  # a FIFO, socket or device node: never a driver attribute
                except OSError:
                    continue
                name = entry.name
                path = (*parts, name)
                out.entries.setdefault(name, []).append((path, is_dir))
                if is_dir:
                    m = CORE_DIR.match(name)
                    if m and not any(CORE_DIR.match(p) for p in parts):
                        out.cores.add(int(m.group(1)))
                    if len(path) < max_depth:
                        subdirs.append(name)
                    elif not out.stopped:
                        out.stopped = f"search went no deeper than {max_depth} directories"
    except OSError:
        return  # a directory gone or unreadable mid-search: what it held is not found
    for name in subdirs:
        if out.read > max_entries:
            return
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            continue  # replaced by a link or gone since it was listed
        try:
            _walk(child, (*parts, name), out, max_depth, max_entries)
        finally:
            os.close(child)


def _has_in_order(wanted: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    at = iter(parts)
    return all(w in at for w in wanted)


def candidates(result: SearchResult, node: Node, core: int | None) -> list[tuple[str, ...]]:
    """The entries of ``result`` that ``node`` matches (below core ``core`` for a per-core node), sorted."""
    name, parents = node.match[-1], node.match[:-1]
    core_name = None if core is None else f"neuron_core{core}"
    out: list[tuple[str, ...]] = []
    for path, is_dir in result.entries.get(name, ()):
        if is_dir != node.directory:
            continue
        above = path[:-1]
        at_core = [i for i, p in enumerate(above) if CORE_DIR.match(p)]
        if core_name is None:
            if at_core:
                continue
            below = above
        else:
            if len(at_core) != 1 or above[at_core[0]] != core_name:
                continue
            below = above[at_core[0] + 1 :]
        if _has_in_order(parents, below):
            out.append(path)
    return sorted(out)


class DeviceNodes:
    """Where one device's nodes are, found on first use and kept (see the module docstring)."""

    def __init__(self, root: RootFS, device_rel: str) -> None:
        self.root = root
        self.rel = device_rel
        self.layout: KnownLayout | None = None
        self.found: dict[tuple[Node, int], Found] = {}  # (node, core or -1) -> where (the last lookup's answer)
        self._current: set[tuple[Node, int]] = set()  # the keys of `found` looked up since the last `reset`
        self._search: SearchResult | None = None
        self.reset()

    def reset(self) -> None:
        """Look for every node again at its next `find` (one vanished or failed). Until a node is looked up
        again, ``found`` keeps its last answer, so what the device was seen to expose is still reported (a
        failed read between two lookups does not empty the group's ``sources``)."""
        self.layout = next((k for k in KNOWN_LAYOUTS if self.root.is_dir(f"{self.rel}/{k.stats}")), None)
        self._current.clear()
        self._search = None

    def find(self, node: Node, core: int = -1) -> Found:
        key = (node, core)
        if key in self._current:
            return self.found[key]
        got = self.found[key] = self._locate(node, core)
        self._current.add(key)
        return got

    def searched(self) -> SearchResult:
        """The device's bounded search, made once."""
        if self._search is None:
            self._search = search(self.root, self.rel)
        return self._search

    def cores(self) -> tuple[int, ...]:
        """The physical cores found by the search (for a device whose cores are not where a known layout puts
        them)."""
        return tuple(sorted(self.searched().cores))

    def _locate(self, node: Node, core: int) -> Found:
        layout = self.layout
        if layout is not None:
            rel = layout.core_path(self.rel, core, node) if node.core else layout.device_path(self.rel, node)
            if self.root.is_dir(rel) if node.directory else self.root.exists(rel):
                return Found(rel, f"{KNOWN}:{layout.name}")
        result = self.searched()
        found = candidates(result, node, core if node.core else None)
        if len(found) == 1:
            return Found(f"{self.rel}/{'/'.join(found[0])}", DISCOVERED)
        if found:
            shown = ", ".join("/".join(p) for p in found[:MAX_CANDIDATES_SHOWN])
            more = ", ..." if len(found) > MAX_CANDIDATES_SHOWN else ""
            return Found(None, "", f"{len(found)} candidates ({shown}{more}), none used")
        return Found(None, "", result.stopped)
