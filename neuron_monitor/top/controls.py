"""Keys: bytes read from the terminal -> key names, and key names -> changes of the viewer's state.

`decode` turns what one read of the terminal returned into key names ("q", "up", "pgdn", "enter", "esc", ...).
`ViewState.press` applies one key and says what the caller must do (quit, move a replay's play head); it is pure,
so every key is unit-tested without a terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_monitor.daemon.tagmatch import TagFilter, compile_tag_filter

_SEQUENCES = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"\x1bOA": "up",
    b"\x1bOB": "down",
    b"\x1bOC": "right",
    b"\x1bOD": "left",
    b"\x1b[5~": "pgup",
    b"\x1b[6~": "pgdn",
    b"\x1b[H": "home",
    b"\x1b[F": "end",
    b"\x1bOH": "home",
    b"\x1bOF": "end",
    b"\x1b[1~": "home",
    b"\x1b[4~": "end",
    b"\x1b[7~": "home",
    b"\x1b[8~": "end",
}
_CSI = re.compile(rb"\x1b(\[[0-9;]*[~A-Za-z]|O[A-Za-z])")
PAGE = 10


def decode(data: bytes) -> list[str]:
    """Key names in ``data`` (one read of a terminal in non-canonical mode); unknown sequences are dropped."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        if data[i] == 0x1B:
            m = _CSI.match(data, i)
            if m:
                name = _SEQUENCES.get(m.group(0))
                if name:
                    keys.append(name)
                i = m.end()
                continue
            keys.append("esc")
            i += 1
            continue
        b = data[i]
        i += 1
        if b in (0x0D, 0x0A):
            keys.append("enter")
        elif b in (0x7F, 0x08):
            keys.append("backspace")
        elif b == 0x0C:
            keys.append("redraw")
        elif b == 0x20:
            keys.append("space")
        elif 0x20 < b < 0x7F:
            keys.append(chr(b))
        elif b >= 0x80:  # part of a UTF-8 character: keep the text of a filter being typed
            start = i - 1
            while i < len(data) and 0x80 <= data[i] < 0xC0:
                i += 1
            keys.append(data[start:i].decode("utf-8", "replace"))
    return keys


REPLAY_KEYS = {
    "space": "toggle",
    "left": "back",
    "right": "forward",
    "[": "seek-back",
    "]": "seek-forward",
    "home": "first",
    "end": "last",
    "+": "faster",
    "-": "slower",
}


SORTS = ("", "util", "memory", "tag", "pid")  # the runtimes' order: "" is the report's; s cycles


@dataclass
class ViewState:
    """What the viewer chose: the view, the tag filter (and the one being typed), help, scrolling, the selected
    device."""

    view: str = "d"
    filter_text: str = ""
    tag_filter: TagFilter | None = None
    prompt: str | None = None
    help: bool = False
    scroll: int = 0
    notice: str = ""  # a short answer to the last key (e.g. a bad regular expression)
    sort: str = ""  # one of SORTS
    selected: int | None = None  # the device under the cursor in the devices view (None: no cursor yet)
    graph: str = "braille"  # the history section's graphs: "braille" or "blocks" (g toggles)

    def set_filter(self, text: str) -> bool:
        """Apply a tag filter (a regular expression searched in the tag); False, with a notice, if invalid. RE2, as
        the daemon's tag_filter: tags are the workloads', so a backtracking engine could be made to take exponential
        time (``(a+)+$`` against a tag of 40 "a" and "!" wedged top, deaf to SIGTERM)."""
        if not text:
            self.filter_text, self.tag_filter = "", None
            return True
        try:
            pattern = compile_tag_filter(text)
        except ValueError as e:
            self.notice = str(e)
            return False
        self.filter_text, self.tag_filter = text, pattern
        return True

    def press(self, key: str) -> str:
        """Apply one key. Returns "quit", a replay action (see REPLAY_KEYS), "redraw" or ""."""
        if self.prompt is not None:
            return self._prompt_key(key)
        self.notice = ""
        if self.help:
            self.help = False
            return "quit" if key == "q" else ""
        if key == "q":
            return "quit"
        if key == "s":
            self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)] if self.sort in SORTS else SORTS[0]
            return ""
        if key in ("d", "c", "r", "m"):
            if key != self.view:
                self.view, self.scroll = key, 0
            return ""
        if key == "?":
            self.help = True
            return ""
        if key == "f":
            self.prompt = self.filter_text
            return ""
        moves = {"up": -1, "down": 1, "pgup": -PAGE, "pgdn": PAGE, "k": -1, "j": 1}
        if key in moves:
            if self.view == "d":  # the devices view moves a cursor (the table follows it); the first key shows it
                self.selected = 0 if self.selected is None else max(0, self.selected + moves[key])
            else:
                self.scroll = max(0, self.scroll + moves[key])
            return ""
        if key == "g":
            self.graph = "blocks" if self.graph == "braille" else "braille"
            return ""
        if key == "esc":
            self.selected = None
            return ""
        if key == "redraw":
            return "redraw"
        return REPLAY_KEYS.get(key, "")

    def _prompt_key(self, key: str) -> str:
        assert self.prompt is not None
        if key == "g":
            self.graph = "blocks" if self.graph == "braille" else "braille"
            return ""
        if key == "esc":
            self.prompt = None
        elif key == "enter":
            if self.set_filter(self.prompt.strip()):
                self.scroll = 0
            self.prompt = None
        elif key == "backspace":
            self.prompt = self.prompt[:-1]
        elif key == "space":
            self.prompt += " "
        elif len(key) == 1:
            self.prompt += key
        return ""
