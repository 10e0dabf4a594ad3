"""The live screen's writer: rows encoded to exactly the width in cells, sanitized, and sent only when changed."""

from __future__ import annotations

import io
import re

import pytest
from rich.cells import cell_len

from neuron_monitor.top.terminal import ENTER, LEAVE, FullScreen

SGR = re.compile(r"\x1b\[[0-9;]*m")
MOVE = re.compile(r"\x1b\[(\d+);1H")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no descriptor")


def screen(width: int, height: int) -> tuple[FullScreen, Tty]:
    out = Tty()
    fs = FullScreen(None, file=out)
    fs._size = (width, height)
    return fs, out


def sent_rows(text: str) -> dict[int, str]:
    """row number -> the text written there (styles removed)."""
    parts = MOVE.split(text)
    return {int(parts[i]): SGR.sub("", parts[i + 1]) for i in range(1, len(parts), 2)}


def test_first_frame_is_whole_then_only_changed_rows_are_sent() -> None:
    fs, out = screen(20, 5)
    with fs:
        fs.draw([[("title", "bold")], [("a", "")], [("b", "green")]])
        first = out.getvalue()
        assert first.startswith(ENTER)
        rows = sent_rows(first[len(ENTER) :])
        assert sorted(rows) == [1, 2, 3, 4, 5]
        assert all(len(r) == 20 for r in rows.values())  # padded: what was there before is overwritten
        assert rows[1].rstrip() == "title" and rows[4] == " " * 20
        mark = len(out.getvalue())
        fs.draw([[("title", "bold")], [("a changed", "")], [("b", "green")]])
        assert sent_rows(out.getvalue()[mark:]) == {2: "a changed".ljust(20)}
        mark = len(out.getvalue())
        fs.draw([[("title", "bold")], [("a changed", "")], [("b", "green")]])
        assert out.getvalue()[mark:] == ""  # nothing changed, nothing sent
        fs.invalidate()  # Ctrl-L
        fs.draw([[("title", "bold")]])
        assert sorted(sent_rows(out.getvalue()[mark:])) == [1, 2, 3, 4, 5]
    assert out.getvalue().endswith(LEAVE)
    assert "\x1b[2J" not in out.getvalue() and "\x1b[2K" not in out.getvalue()


def test_a_new_size_sends_every_row() -> None:
    fs, out = screen(20, 3)
    fs.draw([[("x", "")]])
    fs._size = (30, 4)
    mark = len(out.getvalue())
    fs.draw([[("x", "")]])
    rows = sent_rows(out.getvalue()[mark:])
    assert sorted(rows) == [1, 2, 3, 4] and all(len(r) == 30 for r in rows.values())


def test_rows_are_cropped_in_cells_and_sanitized() -> None:
    fs, out = screen(10, 2)
    fs.draw([[("界界界界界界", "red")], [("\x1b[2Jevil", ""), ("⣿⣿⣿⣿⣿⣿⣿⣿", "cyan")]])
    rows = sent_rows(out.getvalue())
    assert cell_len(rows[1]) == 10 and rows[1] == "界界界界界"  # wide characters: two cells each
    assert rows[2] == "␛[2Jevil⣿⣿" and "\x1b[2J" not in out.getvalue()
    fs2, out2 = screen(9, 1)
    fs2.draw([[("界界界界界", "")]])
    assert cell_len(sent_rows(out2.getvalue())[1]) == 9  # a wide character cut in half becomes a space


def test_styles_become_sgr_codes_and_no_color_drops_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    fs, out = screen(10, 1)
    fs.draw([[("ok", "bold red")]])
    assert "\x1b[1;31mok\x1b[0m" in out.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    fs, out = screen(10, 1)
    fs.draw([[("ok", "bold red")]])
    assert "\x1b[1mok\x1b[0m" in out.getvalue() and "31" not in out.getvalue()


class LatinTty(Tty):
    @property
    def encoding(self) -> str:
        return "iso-8859-1"


def test_a_terminal_that_cannot_show_braille_still_gets_its_frame() -> None:
    out = LatinTty()
    fs = FullScreen(None, file=out)
    fs._size = (12, 1)
    fs.draw([[("cpu ⣿⣿▁█ é", "")]])
    assert sent_rows(out.getvalue())[1] == "cpu ???? é  "
