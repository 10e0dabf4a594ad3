"""A pipe's buffer size, read and grown (Linux ``F_GETPIPE_SZ``/``F_SETPIPE_SZ``): the daemon grows its stdout to
hold a few report lines (daemon/output.py), the Prometheus exporter its stdin to coalesce reads
(exporters/prometheus/ingest.py). Either end may resize the one pipe they share, so a pipe is only ever grown, to a
power of two, and never past ``/proc/sys/fs/pipe-max-size`` (1 MiB by default): more needs CAP_SYS_RESOURCE
(pipe(7)), so asking for it would only be refused.
"""

from __future__ import annotations

import contextlib
import fcntl

from neuron_monitor.util.inputfile import InputFileError, read_regular

PIPE_MAX_SIZE = "/proc/sys/fs/pipe-max-size"
DEFAULT_PIPE_MAX = 1 << 20  # Linux's default pipe-max-size, assumed when the file cannot be read


def pipe_size(fd: int) -> int:
    """The buffer size in bytes of the pipe ``fd``; raises ``OSError`` when ``fd`` is not a pipe."""
    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def pipe_max_size() -> int:
    """The largest buffer an unprivileged process may give a pipe."""
    try:
        return int(read_regular(PIPE_MAX_SIZE, 64))
    except (InputFileError, ValueError):
        return DEFAULT_PIPE_MAX


def grow_pipe(fd: int, want: int) -> int:
    """Grow the pipe ``fd`` to hold at least ``want`` bytes (the next power of two, capped at pipe-max-size); a
    pipe already that large, or larger, is left as it is. Returns the size afterwards, the size before when growing
    was refused. Raises ``OSError`` when the size cannot be read (``fd`` is not a pipe)."""
    size = pipe_size(fd)
    target = min(1 << max(want - 1, 0).bit_length(), pipe_max_size())
    if target > size:
        with contextlib.suppress(OSError):  # refused (a limit on the user's pipe pages): the pipe stays as it was
            size = int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, target))
    return size
