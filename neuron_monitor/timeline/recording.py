"""Recording files: the daemon's ``--record FILE`` writer and the reader the timeline tools share.

On-disk format: a gzip file (RFC 1952) holding the report lines exactly as the daemon prints them
(compact JSON, one report per line, each with its ``report_time``). The writer deflates each line into
the open gzip member and ends it with a *sync flush*, so every complete record is on disk, byte-aligned,
as soon as ``append`` returns:

- compact: each line is deflated at level 1 (cost and ratio measured in docs/timeline.md);
- readable while being written: a reader decompresses up to the last sync flush and yields every
  complete line; ``zcat FILE | jq`` works too (zcat warns about the unfinished member of a live file);
- safe: records are never rewritten. ``close`` and rotation finish the member with its CRC32 and size.
  A crash leaves an unfinished member whose complete lines are all readable. A failed write (disk full)
  is cut back to the last complete record and the member is finished there; later records start a new
  member.

Rotation (logrotate style): when FILE reaches ``max_bytes`` it is finished and renamed FILE.1, FILE.1
becomes FILE.2, ..., FILE.<keep> is deleted, and a new FILE is started. A recorder that starts while
FILE exists rotates it first: each daemon run starts its own file and never appends to an earlier
(possibly crashed) one.

The reader also accepts plain JSON-lines files (``neuron-monitor > out.jsonl``): the gzip magic decides.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.schema.stream import DEFAULT_MAX_LINE_BYTES as MAX_LINE_BYTES
from neuron_monitor.schema.stream import LineBuffer
from neuron_monitor.util.inputfile import InputFileError, kind_of

log = logging.getLogger("neuron_monitor.timeline.recording")

GZIP_MAGIC = b"\x1f\x8b"
# gzip member header: magic, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=255 (unknown)
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# a final, empty stored deflate block: ends a raw deflate stream that was left byte-aligned by a sync flush
_FINAL_EMPTY_BLOCK = b"\x01\x00\x00\xff\xff"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_KEEP = 5
DEFAULT_LEVEL = 1
_READ_CHUNK = 1024 * 1024


class Recorder:
    """Appends encoded report lines to a size-rotated gzip recording.

    Failure policy (the recorder runs on the daemon's write path): ``append`` raises nothing but
    ``OSError``. When a write fails (ENOSPC, EIO, ...) the partial bytes are cut off, the record is
    counted in ``dropped``, the message is kept in ``last_error`` and an ``OSError`` carrying it is raised
    for the daemon to log; the next ``append`` tries again on a fresh gzip member. Earlier records stay
    readable either way.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
        level: int = DEFAULT_LEVEL,
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        if keep < 0:
            raise ValueError("keep must be 0 or more")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.keep = keep
        self.level = level
        self.records = 0
        self.dropped = 0
        self.rotations = 0
        self.last_error = ""
        self._fd = -1
        self._size = 0  # bytes of complete records (and member boundaries) in the open file
        self._comp: Any = None  # zlib compressobj of the open member, None when no member is open
        self._crc = 0
        self._isize = 0
        self._broken = False  # a write failed: the open member must be cut back and finished
        try:
            st: os.stat_result | None = os.stat(self.path)  # through a link: the file that would be written
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a directory given by mistake was renamed FILE.1 by the rotation below; a FIFO blocked the start
            raise _not_regular(st.st_mode)
        if st is not None and st.st_size > 0:
            self._shift()
        self._open()

    # -- file management -------------------------------------------------------------------------------------

    def _open(self) -> None:
        """FILE opened for appending, without waiting (a FIFO put there has no reader: ENXIO, never a hang that no
        stop signal ends); anything but a regular file is refused."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _not_regular(st.st_mode)
        os.set_blocking(fd, True)
        self._fd = fd
        self._size = st.st_size

    def _shift(self) -> None:
        """FILE -> FILE.1 -> FILE.2 ...; FILE.<keep> is deleted (FILE itself when keep is 0)."""
        name = str(self.path)
        if self.keep == 0:
            _unlink_quietly(name)
            return
        _unlink_quietly(f"{name}.{self.keep}")
        for n in range(self.keep - 1, 0, -1):
            src = f"{name}.{n}"
            if os.path.exists(src):
                os.replace(src, f"{name}.{n + 1}")
        os.replace(name, f"{name}.1")

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            if n <= 0:
                raise OSError(errno.EIO, "short write")
            view = view[n:]

    def _member_end(self) -> bytes:
        return _FINAL_EMPTY_BLOCK + struct.pack("<II", self._crc & 0xFFFFFFFF, self._isize & 0xFFFFFFFF)

    def _finish_member(self) -> None:
        """Cut any partial bytes and write the end of the open member (final block, CRC32, size).

        The compressor of a member whose write failed has consumed the lost record, so it is never used for
        data again: the member ends at the last complete record (``_broken`` stays set until it has).
        """
        if self._broken:
            os.ftruncate(self._fd, self._size)
        if self._comp is not None:
            end = self._member_end()
            try:
                self._write_all(end)
            except OSError:
                self._broken = True
                os.ftruncate(self._fd, self._size)
                raise
            self._size += len(end)
            self._comp = None
        self._broken = False

    def _rotate(self) -> None:
        self._finish_member()
        os.close(self._fd)
        self._fd = -1
        try:
            self._shift()
        finally:
            self._open()  # on a failed rename: go on appending to FILE (a new member) rather than stop
        self.rotations += 1

    # -- public API ------------------------------------------------------------------------------------------

    def append(self, line: bytes) -> None:
        """Append one encoded report line (must end with a newline)."""
        if self._fd < 0:
            raise ValueError("recorder is closed")
        if not line.endswith(b"\n"):
            line += b"\n"
        try:
            if self._broken:
                self._finish_member()
            if self._size >= self.max_bytes:
                self._rotate()
            header = b""
            if self._comp is None:
                self._comp = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                self._crc = 0
                self._isize = 0
                header = _GZIP_HEADER
            data = header + self._comp.compress(line) + self._comp.flush(zlib.Z_SYNC_FLUSH)
            try:
                self._write_all(data)
            except OSError:
                # the compressor has consumed this line: the member must end at the last complete record
                self._broken = True
                if header:
                    self._comp = None
                raise
        except OSError as e:
            self.dropped += 1
            self.last_error = f"recording to {self.path}: {e.strerror or e}"
            raise OSError(e.errno, self.last_error) from e
        self._size += len(data)
        self._crc = zlib.crc32(line, self._crc)
        self._isize += len(line)
        self.records += 1

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self._finish_member()
        finally:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_regular(mode: int) -> OSError:
    """The error for a recording path that is not a regular file (its ``strerror`` is the daemon's line)."""
    return OSError(errno.EINVAL, f"is {kind_of(mode)}, not a regular file")


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# ---- reading ----------------------------------------------------------------------------------------


@dataclass
class ReadStats:
    """What a reader met: records yielded, lines skipped, files with an unfinished tail, unreadable files."""

    files: int = 0
    records: int = 0
    bad_lines: int = 0
    truncated_tails: int = 0
    errors: list[str] = field(default_factory=list)


_ROTATED = re.compile(r"^(?P<base>.+)\.(?P<n>[0-9]+)$")


def recording_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files of one recording in time order: FILE.N ... FILE.1, FILE (only those that exist).

    A path that names a rotated file itself (``rec.gz.3``) stands for that file only.
    """
    p = Path(path)
    rotated: list[tuple[int, Path]] = []
    parent = p.parent if str(p.parent) else Path(".")
    prefix = p.name + "."
    try:
        names = os.listdir(parent)
    except OSError:
        names = []
    for name in names:
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            rotated.append((int(name[len(prefix) :]), parent / name))
    files = [f for _, f in sorted(rotated, reverse=True)]
    if p.exists() or not files:
        files.append(p)
    return files


def expand_recordings(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every file of every named recording, each once, each recording's files in time order."""
    seen: set[str] = set()
    out: list[Path] = []
    for path in paths:
        for f in recording_files(path):
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def _gzip_payload_start(buf: bytes) -> int:
    """Offset of the deflate data after a gzip member header; -1 if ``buf`` lacks part of the header."""
    if len(buf) < 10:
        return -1
    if buf[:2] != GZIP_MAGIC or buf[2] != 8:
        raise ValueError("not a gzip member")
    flags = buf[3]
    pos = 10
    if flags & 4:  # FEXTRA
        if len(buf) < pos + 2:
            return -1
        pos += 2 + struct.unpack_from("<H", buf, pos)[0]
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            end = buf.find(b"\0", pos)
            if end < 0:
                return -1
            pos = end + 1
    if flags & 2:  # FHCRC
        pos += 2
    return pos if pos <= len(buf) else -1


def iter_lines(f: Any, stats: ReadStats) -> Iterator[bytes]:
    """The complete lines of an open recording file (gzip with any number of members, or plain text).

    A last line without its newline, or a gzip member without its end, is a record still being written or cut
    by a crash: it is counted in ``stats.truncated_tails`` and left out. A line longer than ``MAX_LINE_BYTES``
    (the exporters' cap on a report line) is dropped while it streams in, never held whole, and counted in
    ``stats.bad_lines``; a gzip member is inflated at most ``_READ_CHUNK`` bytes at a time, so a small file
    that inflates to gigabytes without a newline (a gzip bomb) costs a bounded buffer, not its inflated size.
    """
    lines = LineBuffer(MAX_LINE_BYTES)

    def complete(found: list[bytes | None]) -> Iterator[bytes]:
        for line in found:
            if line is None:
                stats.bad_lines += 1
            else:
                yield line

    def tail() -> None:
        if any(line is None or line.strip() for line in lines.finish()):
            stats.truncated_tails += 1

    buf = f.read(_READ_CHUNK)
    at_eof = not buf
    if buf[:2] != GZIP_MAGIC:
        while buf:
            yield from complete(lines.feed(buf))
            buf = f.read(_READ_CHUNK)
        tail()
        return
    decomp: Any = None
    while True:
        if decomp is None:
            start = _gzip_payload_start(buf)
            if start < 0:  # no whole member header yet
                more = b"" if at_eof else f.read(_READ_CHUNK)
                if not more:
                    if buf:
                        stats.truncated_tails += 1
                    return
                buf += more
                continue
            decomp = zlib.decompressobj(-15)
            buf = buf[start:]
        while not decomp.eof:  # inflate in bounded steps: the input left over waits in unconsumed_tail
            out = decomp.decompress(buf, _READ_CHUNK)
            buf = decomp.unconsumed_tail
            yield from complete(lines.feed(out))
            if not buf and len(out) < _READ_CHUNK:  # a full step may leave output inside zlib: ask again
                break
        if decomp.eof:
            rest = decomp.unused_data
            while len(rest) < 8 and not at_eof:  # the member's CRC32 and size
                more = f.read(_READ_CHUNK)
                at_eof = not more
                rest += more
            if len(rest) < 8:
                stats.truncated_tails += 1
                return
            buf = rest[8:]
            decomp = None
            continue
        if at_eof:
            break
        buf = f.read(_READ_CHUNK)
        at_eof = not buf
    if decomp is not None:
        lines.finish()
        stats.truncated_tails += 1
    else:
        tail()


def _open_recording(path: Path) -> Any:
    """``path`` opened for reading as a regular file: without waiting (a FIFO with no writer), refusing anything
    that is not a regular file (a FIFO, /dev/zero, a directory) with one line naming it (`InputFileError`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputFileError(f"{path}: is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_file(path: Path, stats: ReadStats) -> Iterator[dict[str, Any]]:
    try:
        f = _open_recording(path)
    except OSError as e:
        stats.errors.append(f"{path}: {e.strerror or e}")
        return
    except InputFileError as e:
        stats.errors.append(str(e))
        return
    stats.files += 1
    with f:
        try:
            for line in iter_lines(f, stats):
                if not line.strip():
                    continue
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    stats.bad_lines += 1
                    continue
                if not isinstance(obj, dict):
                    stats.bad_lines += 1
                    continue
                stats.records += 1
                yield obj
        except (zlib.error, ValueError, OSError) as e:
            stats.errors.append(f"{path}: corrupt recording ({e}); read {stats.records} records before it")


class RecordingReader:
    """Iterates the reports of one or more recordings in file order; ``stats`` says what was skipped."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.files = expand_recordings(paths)
        self.stats = ReadStats()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for path in self.files:
            yield from _read_file(path, self.stats)


PathArg = str | os.PathLike[str]


def iter_recording(paths: Iterable[PathArg] | PathArg) -> Iterator[dict[str, Any]]:
    """The reports of the named recordings (rotated files included), oldest file first."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    yield from RecordingReader(paths)
