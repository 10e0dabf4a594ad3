"""The terminal: the only module that imports the terminal library (Rich).

`FullScreen` owns the terminal while the live view runs: the alternate screen with the cursor hidden, and the
keyboard in non-canonical, no-echo mode. Each frame is written as a diff of the previous one: every row is
encoded once (styles as SGR codes, cropped and padded to the terminal's width in cells), and only the rows that
differ from what the terminal already shows are sent, each after a cursor move to its row. Nothing is ever
cleared (no flicker); a new size, Ctrl-L or a return from Ctrl-Z sends every row again. Leaving it, by any path
(q, SIGTERM, Ctrl-C, an exception), restores the saved terminal attributes, the cursor and the main screen.
`print_snapshot` writes one `--once` frame with colours to a terminal.

Rich parses the layout's style strings ("bold red") into SGR codes for the terminal's colour system (and drops
colours under NO_COLOR), measures wide characters, and prints `--once` snapshots.
"""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import tty
from typing import TextIO

from rich.cells import cell_len, set_cell_size
from rich.console import COLOR_SYSTEMS, Console
from rich.style import Style
from rich.text import Text

from neuron_monitor.top.layout import MAX_COLUMNS, MAX_ROWS, Line
from neuron_monitor.util.sanitize import sanitize

ENTER = "\x1b[?1049h\x1b[?25l"  # the alternate screen, cursor hidden
LEAVE = "\x1b[?25h\x1b[?1049l"  # cursor shown, the main screen back


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


class RowEncoder:
    """Styled lines -> terminal rows: sanitized text with SGR codes, exactly ``width`` cells wide."""

    def __init__(self, console: Console) -> None:
        name = console.color_system
        self.color_system = COLOR_SYSTEMS.get(name) if name else None
        self.no_color = console.no_color
        self._codes: dict[str, tuple[str, str]] = {}

    def codes(self, style: str) -> tuple[str, str]:
        """(start, end) escape codes of a Rich style string, cached ("", "" without colours or for no style)."""
        found = self._codes.get(style)
        if found is None:
            parsed = Style.parse(style)
            if self.no_color:
                parsed = parsed.without_color
            marked = parsed.render("\0", color_system=self.color_system) if self.color_system else "\0"
            start, _, end = marked.partition("\0")
            found = self._codes[style] = (start, end)
        return found

    def row(self, line: Line, width: int) -> str:
        """One line cropped to ``width`` cells (wide characters counted as two) and padded with spaces to it."""
        parts: list[str] = []
        room = width
        for chunk, style in line:
            if room <= 0:
                break
            text = sanitize(chunk)
            if text.isascii():
                if len(text) > room:
                    text = text[:room]
                cells = len(text)
            else:
                cells = cell_len(text)
                if cells > room:
                    text = set_cell_size(text, room)
                    cells = room
            if not text:
                continue
            if style:
                start, end = self.codes(style)
                parts.append(f"{start}{text}{end}")
            else:
                parts.append(text)
            room -= cells
        if room > 0:
            parts.append(" " * room)
        return "".join(parts)


class FullScreen:
    """Context manager owning the terminal for the live view. ``keys_fd`` is the terminal to read keys from."""

    def __init__(self, keys_fd: int | None, file: TextIO | None = None) -> None:
        self.keys_fd = keys_fd
        self.console = Console(file=file or sys.stdout, highlight=False)
        self.file = self.console.file
        self.encoder = RowEncoder(self.console)
        encoding = (self.console.encoding or "utf-8").lower()
        # a terminal whose encoding cannot show braille or blocks gets "?" for them rather than no frame at all
        self._legacy = None if encoding.replace("-", "").startswith("utf") else encoding
        self._saved: list[int | list[bytes | int]] | None = None
        columns, lines = self.console.size
        self._size = (min(columns, MAX_COLUMNS), min(lines, MAX_ROWS))
        self._shown: list[str] = []  # the rows the terminal shows now
        self._shown_size = (0, 0)
        self.rows_sent = 0  # rows written since the start (the diff's effect, for tests and the benchmark)

    def size(self) -> tuple[int, int]:
        """The terminal's size now (asked of the terminal itself: COLUMNS/LINES in the environment may be stale)."""
        try:
            size = os.get_terminal_size(self.file.fileno())
        except (OSError, ValueError):
            return self._size
        self._size = (min(size.columns, MAX_COLUMNS), min(size.lines, MAX_ROWS))  # a frame costs its area
        return self._size

    def invalidate(self) -> None:
        """Forget what the terminal shows: the next frame sends every row (Ctrl-L, after Ctrl-Z)."""
        self._shown = []

    def draw(self, lines: list[Line]) -> None:
        """Show ``lines`` (laid out for the last `size`) in place of the previous frame, sending changed rows only."""
        width, height = self._size
        width, height = max(1, width), max(1, height)
        if (width, height) != self._shown_size:
            self._shown, self._shown_size = [], (width, height)
        rows = [self.encoder.row(line, width) for line in lines[:height]]
        blank = " " * width
        rows += [blank] * (height - len(rows))
        shown = self._shown
        out: list[str] = []
        for n, row in enumerate(rows):
            if n >= len(shown) or shown[n] != row:
                out.append(f"\x1b[{n + 1};1H{row}")
        self._shown = rows
        if out:
            self.rows_sent += len(out)
            self._write("".join(out))

    def _write(self, text: str) -> None:
        if self._legacy is not None:
            with contextlib.suppress(LookupError):
                text = text.encode(self._legacy, "replace").decode(self._legacy)
        with contextlib.suppress(OSError, ValueError):
            self.file.write(text)
            self.file.flush()

    def __enter__(self) -> FullScreen:
        if self.keys_fd is not None:
            with contextlib.suppress(termios.error, OSError):
                self._saved = termios.tcgetattr(self.keys_fd)
                tty.setcbreak(self.keys_fd)  # keys arrive one by one, unechoed; Ctrl-C still sends SIGINT
        try:
            self._write(ENTER)
        except BaseException:
            self._restore_keys()
            raise
        self.invalidate()
        return self

    def _restore_keys(self) -> None:
        if self._saved is not None and self.keys_fd is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.keys_fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def __exit__(self, *exc: object) -> None:
        try:
            self._write(LEAVE)
        finally:
            self._restore_keys()
