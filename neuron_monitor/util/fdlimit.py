"""Open-file descriptors: the process's limit raised at start, and running out of them an error of its own.

`raise_open_file_limit` raises the soft RLIMIT_NOFILE to the hard limit, as Go's runtime does for every Go
program since Go 1.19 (os package, "raise the open file limit"): the soft limit of 1024 that systemd and many
container runtimes give a service is a compatibility default for programs that use select(2), which this one does
not. A trn2.48xlarge keeps about 5,200 descriptors open (docs/performance.md, "Descriptors"), so below the hard
limit every device would be lost.

`OutOfDescriptors` is what an open that failed with EMFILE (this process's limit) or ENFILE (the system's) becomes
where the daemon opens what it reads (`neuron_monitor.host.rootfs`, `neuron_monitor.neuron.devio`). It is not an
OSError on purpose: the readers treat an OSError as "this file is not there" (a missing device, a driver without
that file, an empty listing), and running out of descriptors is none of those. It travels up to the group, whose
``error`` then says "too many open files" and whose health verdict is ``unknown``.
"""

from __future__ import annotations

import errno
import os
import resource

EXHAUSTED = (errno.EMFILE, errno.ENFILE)
_NR_OPEN = "/proc/sys/fs/nr_open"  # the kernel's ceiling for RLIMIT_NOFILE (an infinite hard limit cannot be set)


class OutOfDescriptors(Exception):
    """An open failed because the process (EMFILE) or the system (ENFILE) has no descriptor left."""

    def __init__(self, cause: OSError, what: object = "") -> None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        whose = "the system's file table is full" if cause.errno == errno.ENFILE else f"RLIMIT_NOFILE {soft} reached"
        where = f" opening {what}" if what else (f" opening {cause.filename}" if cause.filename else "")
        super().__init__(f"too many open files ({whose}){where}")
        self.errno = cause.errno


def exhausted(e: OSError) -> bool:
    """True when ``e`` says no descriptor is left."""
    return e.errno in EXHAUSTED


def check(e: OSError, what: object = "") -> None:
    """Raise `OutOfDescriptors` from ``e`` when it says no descriptor is left; otherwise return (the caller
    re-raises ``e``)."""
    if e.errno in EXHAUSTED:
        raise OutOfDescriptors(e, what) from e


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (or the kernel's nr_open when the hard limit is infinite);
    returns the (soft, hard) limits now in force. Never fails: a limit that cannot be raised stays as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open(_NR_OPEN, "rb") as f:
                target = int(f.read(32).strip() or b"0")
        except (OSError, ValueError):
            return soft, hard
    if soft == resource.RLIM_INFINITY or (target != resource.RLIM_INFINITY and soft >= target) or target <= 0:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft, hard
    return target, hard


def open_descriptors() -> int:
    """How many descriptors this process has open now (for logs and tests)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
    except OSError:
        return -1
