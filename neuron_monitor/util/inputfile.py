"""One discipline for every file a program reads or appends to by name: regular files only, never a wait, a cap.

`read_regular(path, limit)` opens with O_NONBLOCK (a FIFO opens at once instead of waiting for a writer), checks
with fstat that it is a regular file (not a FIFO, a device such as /dev/zero, a socket or a directory) and reads at
most ``limit`` bytes; anything else raises `InputFileError` whose text is one short line naming the file and the
problem. `open_append` opens an output file the same way: a FIFO without a reader is refused (ENXIO) instead of
blocking start-up. `shown` clips any user-supplied text for an error line, so no message echoes a whole input.
"""

from __future__ import annotations

import errno
import os
import stat

CONFIG_MAX_BYTES = 1024 * 1024  # monitor.conf and the web config are a few hundred bytes; 1 MiB is generous
SHOWN_CHARS = 60  # at most this much of a user's value appears in an error line


class InputFileError(Exception):
    """A file that cannot be used; ``str()`` is one bounded line."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` clipped to ``limit`` characters (with a note of the full length), for error lines."""
    text = repr(value)
    if len(text) <= limit:
        return text
    length = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[:limit]}... ({length} chars)"


def kind_of(mode: int) -> str:
    """What a file is, in words, from its ``st_mode``."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _why(e: OSError) -> str:
    if e.errno == errno.ENOENT:
        return "no such file"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.EISDIR:
        return "is a directory, not a regular file"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    return f"cannot open: {e.strerror or e}"


def read_capped(fd: int, limit: int, path: object) -> bytes:
    """Read ``fd`` from its current offset to the end, refusing more than ``limit`` bytes (OSError EFBIG)."""
    parts: list[bytes] = []
    got = 0
    while True:
        chunk = os.read(fd, min(limit + 1 - got, 1 << 20))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        got += len(chunk)
        if got > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))


def read_fd_capped(fd: int, limit: int, name: str) -> bytes:
    """Check that ``fd`` is a regular file and read all of it, refusing more than ``limit`` bytes."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(f"{name}: is {kind_of(st.st_mode)}, not a regular file")
    try:
        return read_capped(fd, limit, name)
    except OSError as e:
        if e.errno != errno.EFBIG:
            raise
    raise InputFileError(f"{name}: larger than the {limit}-byte limit for this file")


def read_regular(path: str | os.PathLike[str], limit: int = CONFIG_MAX_BYTES, name: str | None = None) -> bytes:
    """The whole content of regular file ``path`` (at most ``limit`` bytes), or `InputFileError`."""
    label = name if name is not None else os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise InputFileError(f"{label}: {_why(e)}") from None
    try:
        return read_fd_capped(fd, limit, label)
    except OSError as e:
        raise InputFileError(f"{label}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def open_append(path: str, name: str | None = None) -> int:
    """A descriptor for appending to ``path`` (created if absent): a regular file, a FIFO that has a reader, or a
    character device such as /dev/null. Never blocks: a FIFO without a reader is an `InputFileError`. The
    descriptor is returned in blocking mode (writes wait for a slow reader, as a pipe should)."""
    label = name if name is not None else path
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, 0o644)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise InputFileError(f"{label}: is a FIFO with no reader (start the reader first)") from None
        raise InputFileError(f"{label}: {_why(e)}") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode) or stat.S_ISSOCK(mode) or stat.S_ISBLK(mode):
        os.close(fd)
        raise InputFileError(f"{label}: is {kind_of(mode)}, not a file to append to")
    os.set_blocking(fd, True)
    return fd
