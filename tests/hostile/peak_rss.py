"""A command's own peak RSS, measured by a small launcher process.

``os.wait4``'s ``ru_maxrss`` of a child of the test process counts the pages the child had between fork and exec,
which are the test process's own: a pytest that has grown to 400 MiB over a long run made every child "peak" at
400 MiB (a child that used 50 MiB failed a 200 MiB bound in the full suite, and passed alone). The launcher, a
fresh small Python, starts the command, waits for it and writes its ``ru_maxrss``: forked from the launcher, the
command's figure holds only its own pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

LAUNCHER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(str(usage.ru_maxrss * 1024))\n"  # kilobytes on Linux
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def launched(cmd: list[str], report: Path) -> list[str]:
    """``cmd`` run through the launcher, which writes the command's peak RSS (bytes) to ``report``."""
    return [sys.executable, "-c", LAUNCHER, str(report), *cmd]


def peak(report: Path) -> int:
    """The peak RSS in bytes the launcher wrote."""
    return int(report.read_text())
