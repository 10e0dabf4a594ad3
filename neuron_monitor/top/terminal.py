"""The terminal: the only module that imports the terminal library (Rich).

`FullScreen` owns the terminal while the live view runs: the alternate screen with the cursor hidden (Rich's
`Live` in screen mode, which rewrites every line in place from the top-left corner, padded to the width, so a
redraw never clears the screen and never flickers), and the keyboard in non-canonical, no-echo mode. Leaving it,
by any path (q, SIGTERM, Ctrl-C, an exception), restores the saved terminal attributes, the cursor and the main
screen. `print_snapshot` writes one `--once` frame with colours to a terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import tty
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from neuron_monitor.top.layout import Line
from neuron_monitor.util.sanitize import sanitize


def to_text(lines: list[Line]) -> Text:
    """Styled lines -> one Rich Text, never wrapped (the layout already fits the width). Every string is
    sanitized here, where it reaches the terminal (`neuron_monitor.util.sanitize`: tags, names and errors come from
    the workload and the reports)."""
    text = Text(no_wrap=True, overflow="crop", end="")
    for n, line in enumerate(lines):
        if n:
            text.append("\n")
        for chunk, style in line:
            text.append(sanitize(chunk), style=style or None)
    return text


def print_snapshot(lines: list[Line], file: TextIO | None = None) -> None:
    """Print a `--once` frame with colours (stdout is a terminal)."""
    console = Console(file=file or sys.stdout, highlight=False, soft_wrap=False)
    console.print(to_text(lines))


class FullScreen:
    """Context manager owning the terminal for the live view. ``keys_fd`` is the terminal to read keys from."""

    def __init__(self, keys_fd: int | None, file: TextIO | None = None) -> None:
        self.keys_fd = keys_fd
        self.console = Console(file=file or sys.stdout, highlight=False)
        self.live = Live(console=self.console, screen=True, auto_refresh=False, transient=True)
        self.live.vertical_overflow = "crop"
        self._saved: list[int | list[bytes | int]] | None = None

    def size(self) -> tuple[int, int]:
        """The terminal's size now (asked of the terminal itself: COLUMNS/LINES in the environment may be stale)."""
        try:
            size = os.get_terminal_size(self.console.file.fileno())
        except (OSError, ValueError):
            w, h = self.console.size
            return w, h
        self.console.size = (size.columns, size.lines)  # Rich would keep the size it read at start
        return size.columns, size.lines

    def draw(self, lines: list[Line]) -> None:
        """Show ``lines`` (laid out for the current `size`) in place of the previous frame."""
        self.live.update(to_text(lines), refresh=True)

    def __enter__(self) -> FullScreen:
        if self.keys_fd is not None:
            with contextlib.suppress(termios.error, OSError):
                self._saved = termios.tcgetattr(self.keys_fd)
                tty.setcbreak(self.keys_fd)  # keys arrive one by one, unechoed; Ctrl-C still sends SIGINT
        try:
            self.live.start()
        except BaseException:
            self._restore_keys()
            raise
        return self

    def _restore_keys(self) -> None:
        if self._saved is not None and self.keys_fd is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.keys_fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def __exit__(self, *exc: object) -> None:
        try:
            self.live.stop()
        finally:
            self._restore_keys()
