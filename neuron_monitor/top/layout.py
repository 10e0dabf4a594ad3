"""Layout: a `Frame` (screen model + view state) -> lines of styled text that fit a terminal of a given size.

A line is a list of `(text, style)` spans; a style is a Rich style string ("" for none), which only the terminal
module interprets, so the whole layout is plain Python and unit-testable as text (`plain`). `render` never
returns more than ``height`` lines nor a line wider than ``width`` characters; ``height=None`` (the `--once`
snapshot) lays out every section in full.
"""

from __future__ import annotations

import textwrap
import time
from dataclasses import dataclass

from neuron_monitor.schema.display import human_bytes
from neuron_monitor.schema.spec import TopColumn
from neuron_monitor.top.history import MEMORY, POWER, UTIL, History, braille, sparkline
from neuron_monitor.top.model import MEMORY_CATEGORIES, MISSING, Core, Device, Runtime, Screen
from neuron_monitor.util.sanitize import sanitize

__all__ = ["Frame", "bar", "core_ranges", "human_bytes", "memory_bar", "percent_text", "plain", "render"]

Span = tuple[str, str]
Line = list[Span]

VIEWS = {"d": "Devices", "c": "Cores", "r": "Runtimes", "m": "Models"}
CATEGORY_LETTERS = {
    "model_code": "M",
    "tensors": "T",
    "constants": "C",
    "model_shared_scratchpad": "S",
    "runtime_memory": "R",
}
CATEGORY_STYLES = {"M": "cyan", "T": "green", "C": "magenta", "S": "yellow", "R": "blue"}
HELP = (
    ("d / c / r / m", "devices, NeuronCores, runtimes, models view"),
    ("s", "sort the runtimes: utilization, memory, tag, pid, report order"),
    ("f", "filter runtimes by tag (a regular expression; empty clears)"),
    ("Up/Down, j/k", "devices view: move the device cursor (its health details below); else scroll"),
    ("PgUp/PgDn", "devices view: move the cursor a page; else scroll a page"),
    ("Esc", "hide the device cursor"),
    ("g", "history graphs: braille (several rows high) or block sparklines"),
    ("Ctrl-L", "redraw the whole screen"),
    ("space", "replay: pause / play"),
    ("Left/Right", "replay: one report back / forward"),
    ("[ / ]", "replay: 60 s back / forward"),
    ("Home / End", "replay: first / last report"),
    ("+ / -", "replay: faster / slower"),
    ("?", "this help (any key closes it)"),
    ("q", "quit"),
)
# the device columns whose cell style is the device's health (neuron_device_health's verdict first, then the
# telemetry roll-up): the device number takes that colour and a device not healthy gets a line with the reason
HEALTH_HEADERS = ("verdict", "health")
MEMORY_LEGEND = "memory: M model code, T tensors, C constants, S shared scratchpad, R runtime"


@dataclass
class Frame:
    """Everything one screen shows: the newest report's model plus the viewer's state."""

    screen: Screen | None
    view: str = "d"
    source: str = ""
    now: float | None = None  # wall clock for the report's age; None: do not show an age (replay)
    received: float | None = None  # wall clock when the report arrived (its age when it has no report_time)
    position: str = ""  # replay position, e.g. "report 12/300 (paused)"
    messages: tuple[str, ...] = ()  # problems of the input (broken lines, vanished runtimes, ended input)
    filter_text: str = ""
    prompt: str | None = None  # the tag filter being typed
    help: bool = False
    scroll: int = 0
    stale_after: float = 5.0  # seconds without a new report before the age turns into a warning
    history: History | None = None  # the live view's recent figures (None: --once, no graphs)
    period: float = 1.0  # seconds between reports (the history's time scale)
    sort: str = ""  # the runtimes' order (controls.SORTS; "" the report's)
    selected: int | None = None  # the device under the cursor (devices view; None: no cursor)
    graph: str = "braille"  # the history section's graphs: "braille" (several rows high) or "blocks" (one row)


def plain(lines: list[Line]) -> str:
    """The text of rendered lines, without styles (for --once on a pipe and for tests), sanitized where it leaves
    for the terminal or file (`neuron_monitor.util.sanitize`)."""
    return "\n".join(sanitize("".join(t for t, _ in line)).rstrip() for line in lines) + "\n"


def percent_text(v: float | None) -> str:
    return "   -  " if v is None else f"{v:5.1f}%"


def _style_for(pct: float | None) -> str:
    if pct is None:
        return "dim"
    return "red" if pct >= 90 else "yellow" if pct >= 60 else "green"


def bar(pct: float | None, width: int) -> list[Span]:
    """A ``[|||||    ]`` bar ``width`` characters wide (brackets included); ``[  ?  ]`` for a value not read (an
    empty bar would read as 0 %)."""
    inner = max(1, width - 2)
    if pct is None:
        return [("[", "dim"), ("?".center(inner), "dim"), ("]", "dim")]
    filled = min(inner, round(inner * max(0.0, pct) / 100.0))
    return [("[", "dim"), ("|" * filled, _style_for(pct)), (" " * (inner - filled), ""), ("]", "dim")]


def memory_bar(memory: dict[str, int], total: int | None, width: int) -> list[Span]:
    """A bar of letters, one run per memory category, against the device total (or the used sum)."""
    inner = max(1, width - 2)
    used = sum(memory.values())
    scale = total if total else used
    spans: list[Span] = [("[", "dim")]
    filled = 0
    if scale:
        for cat in MEMORY_CATEGORIES:
            n = round(inner * memory.get(cat, 0) / scale)
            n = min(n, inner - filled)
            if n > 0:
                letter = CATEGORY_LETTERS[cat]
                spans.append((letter * n, CATEGORY_STYLES[letter]))
                filled += n
    spans += [(" " * (inner - filled), ""), ("]", "dim")]
    return spans


def _device_memory_bar(d: Device, width: int) -> list[Span]:
    """The device's memory bar; ``[   ?   ]`` when a runtime on it could not be read (its memory is unknown)."""
    return bar(None, width) if d.memory_unread else memory_bar(d.memory, d.memory_total, width)


def core_ranges(cores: tuple[int, ...]) -> str:
    """0,1,2,3,8 -> "0-3,8"."""
    out: list[str] = []
    start = prev = None
    for c in cores:
        if start is None:
            start = prev = c
        elif prev is not None and c == prev + 1:
            prev = c
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = c
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ",".join(out) or "-"


def _fit(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _fit_tail(text: str, width: int) -> str:
    """``text`` cut to ``width`` keeping its end (a path's file name), "…" first when cut."""
    if width <= 0:
        return ""
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def _clip(line: Line, width: int) -> Line:
    out: Line = []
    room = width
    for text, style in line:
        if room <= 0:
            break
        if len(text) > room:
            text = text[:room]
        out.append((text, style))
        room -= len(text)
    return out


def _clock(t: float | None) -> str:
    return "-" if t is None else time.strftime("%H:%M:%S", time.localtime(t))


# ---- sections -------------------------------------------------------------------------------------------------


def _title(frame: Frame, width: int) -> list[Line]:
    s = frame.screen
    left = "neuron-monitor-top"
    parts: list[str] = []
    if s is not None:
        if s.instance_type:
            parts.append(s.instance_type)
        if s.device_count:
            # "16x trainium2"; a report that does not name the device type (AWS's older ones): "1 device"
            kind = f"x {s.device_type}" if s.device_type else (" device" if s.device_count == 1 else " devices")
            lnc = f" LNC{s.lnc}" if s.lnc and s.lnc > 1 else ""
            parts.append(f"{s.device_count}{kind} {len(s.cores)} NC{lnc}")
        if s.instance_id:
            parts.append(s.instance_id)
    right_spans: list[Span] = []
    if s is not None:
        # AWS's daemon writes no report_time: then the time the report arrived stands in
        at = s.report_time if s.report_time is not None else frame.received
        right_spans.append((("" if s.report_time is not None or at is None else "received ") + _clock(at), ""))
        if frame.now is not None and at is not None:
            age = max(0.0, frame.now - at)
            style = "bold red" if _stale(frame) else ""
            right_spans.append((f" ({age:.1f}s ago)", style))
    if frame.position:
        right_spans.append((f"  {frame.position}", "bold"))
    right = "".join(t for t, _ in right_spans)
    if len(left) + 1 + len(right) > width:  # a tiny terminal: no time cut to its first digit ("... 0")
        right_spans, right = [], ""
    while parts and len(left) + len("  ".join(parts)) + 2 + len(right) + 1 > width:
        parts.pop()  # the instance id goes first, then the devices
    what = ("  " + "  ".join(parts)) if parts else ""
    pad = width - len(left) - len(what) - len(right)
    line: Line = [(left, "bold"), (what, "")]
    line += [(" " * max(1, pad), ""), *right_spans]
    lines = [_clip(line, width)]
    if frame.source and s is None:
        lines.append([(_fit(f"source: {frame.source}", width), "dim")])
    return lines


def _host(s: Screen, width: int) -> Line:
    """The host line: each spec bar (CPU, memory) with its label and text, the bars sharing the room left."""
    parts = [(("  " if i else "") + b.label + " ", b) for i, b in enumerate(s.host)]
    fixed = sum(len(label) + len(b.text) for label, b in parts)
    bw = max(6, min(30, (width - fixed) // max(1, len(parts))))
    line: Line = []
    for label, b in parts:
        line += [(label, "bold"), *bar(b.percent, bw), (b.text, "")]
    return _clip(line, width)


def _tabs(frame: Frame, width: int) -> Line:
    line: Line = []
    for key, name in VIEWS.items():
        style = "reverse bold" if frame.view == key else ""
        line.append((f" {key} {name} ", style))
        line.append((" ", ""))
    if frame.prompt is not None:
        line.append((f" filter (regex, Enter/Esc): {frame.prompt}_", "bold yellow"))
    else:
        hidden = frame.screen.hidden_runtimes if frame.screen else 0
        ftext = f"f filter /{frame.filter_text}/ ({hidden} hidden)" if frame.filter_text else "f filter"
        line.append((f" {ftext}", "yellow" if frame.filter_text else "dim"))
        line.append((f"  s sort: {frame.sort}" if frame.sort else "  s sort", "yellow" if frame.sort else "dim"))
        line.append(("  ? help  q quit", "dim"))
    return _clip(line, width)


def _live_device_lines(s: Screen, width: int, history: History) -> list[Line]:
    """The device table of the live view: bars when they fit (else figures only), sparklines of utilization
    (and of memory and power when wide) from ``history``, then the specs' columns."""
    extra = sum(c.width + c.gap for c in s.device_columns)
    mem_text_w = 14
    fixed = 4 + 7 + 2 + mem_text_w + extra
    avail = width - fixed
    sparks = (UTIL, MEMORY, POWER) if avail >= 110 else (UTIL,) if avail >= 30 else ()
    bars = avail >= 2 * 8 + 2
    room = avail - (2 * 8 + 2 if bars else 0)
    sw = min(60 if len(sparks) == 1 else 40, room // len(sparks) - 1) if sparks else 0
    bw = (8 + max(0, min(16, (room - len(sparks) * (sw + 1)) // 2))) if bars else 0
    names = {UTIL: "util history", MEMORY: "memory history", POWER: "power history"}
    header = f"{'dev':>3} " + (f"{'utilization':<{bw + 7}}" if bars else f"{'util':>6} ")
    header += "".join(f"{names[k][:sw]:<{sw}} " for k in sparks)
    header += "  " + (f"{'device memory':<{bw + mem_text_w}}" if bars else f"{'memory':<{mem_text_w}}")
    header += "".join(f"{c.header:{c.align}{c.width}}" + " " * c.gap for c in s.device_columns)
    lines: list[Line] = [[(_fit(header, width), "bold underline")]]
    for d in s.devices:
        line: Line = [(f"{d.index:>3} ", _health(d)[0] or "bold")]
        line += [*bar(d.utilization, bw)] if bars else []
        line.append((percent_text(d.utilization) + " " if bars else f"{percent_text(d.utilization)} "[1:], ""))
        for k in sparks:
            points = history.series("dev", d.index, k)
            latest = next((v for v in reversed(points) if v is not None), None)
            line.append((sparkline(points, sw) + " ", _style_for(latest) if k != MEMORY else "cyan"))
        mem = human_bytes(d.memory_used) + (f"/{human_bytes(d.memory_total)}" if d.memory_total else "")
        line.append(("  ", ""))
        if bars:
            line += _device_memory_bar(d, bw)
            mem = " " + mem
        line.append((f"{_fit(mem, mem_text_w):<{mem_text_w}}", ""))
        for column in s.device_columns:
            text, style = d.cells.get(column, (MISSING, "dim"))
            line.append((f"{_fit(text, column.width):{column.align}{column.width}}" + " " * column.gap, style))
        lines.append(_clip(line, width))
    return lines


def _health(d: Device) -> tuple[str, str]:
    """(style, text) of the device's first health column the report fills ("", "" when none)."""
    for header in HEALTH_HEADERS:
        for column, (text, style) in d.cells.items():
            if column.header == header and text != MISSING:
                return style, text
    return "", ""


def _health_lines(s: Screen, width: int) -> list[Line]:
    """One line per device whose health is not good, with the whole verdict and reason."""
    out: list[Line] = []
    for d in s.devices:
        style, text = _health(d)
        if style and style not in ("green", "dim"):
            out.append([(_fit(f"device {d.index}: {text}", width), style)])
    return out


def _cursor(line: Line) -> Line:
    """A device row under the selection cursor: ">" before its number, the whole row in reverse video."""
    first, *rest = line
    text, style = first
    marked = (">" + text[1:], f"{style} reverse".strip())
    return [marked, *((t, f"{st} reverse".strip()) for t, st in rest)]


def _selection_lines(s: Screen, d: Device, width: int, limit: int) -> list[Line]:
    """The selected device's details: its figures and spec cells on one line, then the whole health story (the
    verdict and every reason from the specs' ``top_device_details``), at most ``limit`` lines."""
    style, verdict = _health(d)
    parts = [f"utilization {percent_text(d.utilization).strip()}"]
    mem = human_bytes(d.memory_used) + (f"/{human_bytes(d.memory_total)}" if d.memory_total else "")
    parts.append(f"memory {mem}")
    shown = [c for c in s.device_columns if c in d.cells and c.header not in HEALTH_HEADERS]
    parts += [f"{c.header} {d.cells[c][0]}" for c in shown]
    cores = core_ranges(d.cores)
    head: Line = [(f"device {d.index} (cores {cores}): ", "bold"), ("  ".join(parts), "")]
    lines: list[Line] = [_clip(head, width)]
    story = d.details or ((verdict,) if verdict else ("no health verdict in the report",))
    for n, text in enumerate(story):
        lines.append([(_fit(f"  {text}", width), (style or "dim") if n == 0 else "")])
    if len(lines) > limit:
        lines = [*lines[: limit - 1], [(_fit(f"  ... {len(lines) - limit + 1} more", width), "dim")]]
    return lines


def _history_lines(s: Screen, width: int, history: History, period: float, rows: int = 1) -> list[Line]:
    """Full-width graphs of the whole host: mean device utilization, device memory, power, host CPU; braille
    graphs ``rows`` high (2 points per character), or one row of block sparklines when ``rows`` is 0."""
    label_w = 22
    sw = max(10, width - label_w - 8)
    per_cell = 2 if rows else 1
    seconds = min(history.points, sw * per_cell) * period
    title = f"history (last {seconds:.0f} s, newest on the right; g: {'blocks' if rows else 'braille'})"
    lines: list[Line] = [[(_fit(title, width), "bold underline")]]
    graphs = (
        ("devices utilization", ("all", 0, UTIL), "green"),
        ("devices memory", ("all", 0, MEMORY), "cyan"),
        ("devices power", ("all", 0, POWER), "yellow"),
        *((b.history, ("host", 0, b.history), "magenta") for b in s.host if b.history),
    )
    for label, (kind, index, what), style in graphs:
        points = history.series(kind, index, what)
        if not any(v is not None for v in points):
            continue
        latest = next((v for v in reversed(points) if v is not None), None)
        drawn = braille(points, sw, rows) if rows else [sparkline(points, sw)]
        for n, graph in enumerate(drawn):
            line: Line = [(f"{label if n == 0 else '':<{label_w}}", "bold"), (graph, style)]
            if n == len(drawn) - 1:
                line.append((" " + percent_text(latest), ""))
            lines.append(_clip(line, width))
    return lines if len(lines) > 1 else []


def _graph_count(s: Screen, history: History) -> int:
    """How many host graphs the history section would draw."""
    keys = [("all", 0, UTIL), ("all", 0, MEMORY), ("all", 0, POWER), *(("host", 0, b.history) for b in s.host)]
    return sum(1 for k in keys if k[2] and any(v is not None for v in history.series(*k)))


def _device_lines(s: Screen, width: int) -> list[Line]:
    wide = width >= 150
    cat_cols = 8 * len(MEMORY_CATEGORIES) if wide else 0
    extra = sum(c.width + c.gap for c in s.device_columns)  # the specs' columns (ecc, power, health, ...)
    mem_text_w = 14
    fixed = 4 + 1 + 7 + 2 + 1 + mem_text_w + extra + cat_cols
    bw = max(6, (width - fixed) // 2)
    header = f"{'dev':>3} " + f"{'utilization':<{bw + 7}}" + "  " + f"{'device memory':<{bw + 1 + mem_text_w}}"
    header += "".join(f"{c.header:{c.align}{c.width}}" + " " * c.gap for c in s.device_columns)
    if wide:
        header += "".join(f"{c[:7]:>8}" for c in MEMORY_CATEGORIES)
    lines: list[Line] = [[(_fit(header, width), "bold underline")]]
    for d in s.devices:
        lines.append(_clip(_device_row(d, bw, mem_text_w, s.device_columns, wide), width))
    return lines


def _device_row(d: Device, bw: int, mem_text_w: int, columns: tuple[TopColumn, ...], wide: bool) -> Line:
    line: Line = [
        (f"{d.index:>3} ", _health(d)[0] or "bold"),
        *bar(d.utilization, bw),
        (" " + percent_text(d.utilization), ""),
    ]
    mem = (
        f" {human_bytes(d.memory_used)}/{human_bytes(d.memory_total)}"
        if d.memory_total
        else f" {human_bytes(d.memory_used)}"
    )
    line += [("  ", ""), *_device_memory_bar(d, bw), (f"{mem:<{mem_text_w}}", "")]
    overflow = False
    for column in columns:
        text, style = d.cells.get(column, (MISSING, "dim"))
        overflow = overflow or len(text) > column.width
        line.append((f"{text:{column.align}{column.width}}" + " " * column.gap, style))
    if wide and not overflow:  # a cell wider than its column (a long health text) pushes these out of line
        by_cat = [None if d.memory_unread else d.memory.get(c, 0) for c in MEMORY_CATEGORIES]
        line.append(("".join(f"{human_bytes(n):>8}" for n in by_cat), "dim"))
    return line


def _core_lines(s: Screen, width: int, history: History | None = None) -> list[Line]:
    if not s.cores:
        return [[("no NeuronCores in this report", "dim")]]
    per = s.cores_per_device
    # the physical cores behind each logical one (LNC=2: "45/47"), when whole devices still fit on a row
    nphys = max(len(c.physical) for c in s.cores)
    phys_w = 4 * nphys if nphys > 1 else 0
    if phys_w and (width - 4) // (18 + phys_w) < max(1, per):
        phys_w = 0
    cell_min = 18 + phys_w
    cols = max(1, (width - 4) // cell_min)
    if per and per <= cols:
        cols = (cols // per) * per  # whole devices per row
    label_w = 4 if cols <= per else 7  # "d15 " or "d14-15 "
    cols = max(1, min(cols, (width - label_w) // cell_min))
    cell_w = (width - label_w) // cols
    bw = max(5, min(30, cell_w - 11 - phys_w))
    title = "NeuronCore utilization (sum over the runtimes on each core"
    title += ", then each physical core)" if phys_w else ")"
    if history is not None:
        title += ": history, newest on the right"
    lines: list[Line] = [[(_fit(title, width), "bold underline")]]
    for row_start in range(0, len(s.cores), cols):
        row = s.cores[row_start : row_start + cols]
        first, last = row[0].device, row[-1].device
        label = f"d{first}" if first == last else f"d{first}-{last}"
        line: Line = [(f"{label:<{label_w}}" if per else " " * label_w, "dim")]
        for c in row:
            line += _core_cell(c, bw, cell_w, phys_w, history)
        lines.append(_clip(line, width))
    return lines


def _core_cell(c: Core, bw: int, cell_w: int, phys_w: int, history: History | None = None) -> Line:
    pct = "   -" if c.utilization is None else f"{c.utilization:3.0f}%"
    style = "" if c.tags else "dim"
    if history is not None:  # the core's recent utilization instead of a bar of the newest value
        graph = ("[" + sparkline(history.series("core", c.index, UTIL), bw - 2) + "]", _style_for(c.utilization))
        cell: Line = [(f"{c.index:>3} ", style), graph, (f"{pct:>5}", style)]
    else:
        cell = [(f"{c.index:>3} ", style), *bar(c.utilization, bw), (f"{pct:>5}", style)]
    if phys_w:
        phys = "/".join(f"{p:.0f}" for p in c.physical) if c.physical else "-"
        cell.append((f" {phys:<{phys_w - 1}}", "dim"))
    used = 4 + bw + 5 + phys_w
    return [*cell, (" " * max(1, cell_w - used), "")]


def sorted_runtimes(runtimes: tuple[Runtime, ...], by: str) -> tuple[Runtime, ...]:
    """The runtimes in the order ``by`` asks: "util" and "memory" largest first, "tag" and "pid" ascending, ""
    as in the report (ties keep the report's order)."""
    if by == "util":
        return tuple(sorted(runtimes, key=lambda r: -(r.utilization or 0.0)))
    if by == "memory":
        return tuple(sorted(runtimes, key=lambda r: -r.memory))
    if by == "tag":
        return tuple(sorted(runtimes, key=lambda r: r.tag))
    if by == "pid":
        return tuple(sorted(runtimes, key=lambda r: (r.pid is None, r.pid or 0)))
    return runtimes


def _model_lines(s: Screen, width: int, by: str) -> list[Line]:
    """Each runtime's loaded models: name, id, running or not, device and host memory, cores."""
    tag_w = max(8, min(24, width - 70))
    name_w = max(8, min(40, width - tag_w - 52))
    header = f"{'tag':<{tag_w}} {'pid':>7} {'model':<{name_w}} {'id':>6} {'state':<7} {'device':>8} {'host':>8} cores"
    lines: list[Line] = [[(_fit(header, width), "bold underline")]]
    listed = 0
    for r in sorted_runtimes(s.runtimes, by):
        who = f"{_fit(r.tag, tag_w):<{tag_w}} {_fit('-' if r.pid is None else str(r.pid), 7):>7} "
        if not r.models:
            text = "no models in the report" if r.models is None else "no model loaded"
            lines.append(_clip([(who, "bold"), (text, "dim")], width))
            continue
        for i, m in enumerate(r.models):
            listed += 1
            state = "running" if m.running else "loaded"
            cores = core_ranges(m.cores) or "-"
            row = f"{_fit_tail(m.name or '?', name_w):<{name_w}} {_fit(m.model_id, 6):>6} {state:<7} "
            row += f"{human_bytes(m.device_bytes):>8} {human_bytes(m.host_bytes):>8} {cores}"
            lines.append(
                _clip([(who if i == 0 else " " * len(who), "bold"), (row, "green" if m.running else "")], width)
            )
    title = f"models ({listed} loaded by {len(s.runtimes)} runtime{'' if len(s.runtimes) == 1 else 's'})"
    return [[(_fit(title, width), "bold")], *lines]


def _runtime_lines(s: Screen, width: int, limit: int | None = None, by: str = "", util: bool = False) -> list[Line]:
    """The runtime table in the order ``by``; ``util`` adds each runtime's mean NeuronCore utilization (live)."""
    shown_columns = [c for c in s.runtime_columns if width >= c.min_width]
    util = util and width >= 96  # narrower, the specs' columns keep the room
    # the tag takes what the fixed columns leave (an optional column borrows its separator from the note)
    reserve = 4 + 8 + 10 + (6 if util else 0) + sum(c.width + (0 if c.min_width else 1) for c in shown_columns)
    tag_w = max(8, min(24, width - reserve))
    cols: list[tuple[str, int, str]] = [("tag", tag_w, "<"), ("pid", 7, ">"), ("cores", 9, "<")]
    cols += [("util", 5, ">")] if util else []
    cols += [(c.header, c.width, c.align) for c in shown_columns]
    used = sum(w + 1 for _, w, _ in cols)
    note_w = width - used
    header = " ".join(f"{n:{a}{w}}" for n, w, a in cols) + (" note" if note_w > 6 else "")
    title = f"runtimes ({len(s.runtimes)}"
    title += f", {s.hidden_runtimes} hidden by the filter)" if s.hidden_runtimes else ")"
    lines: list[Line] = [[(_fit(title, width), "bold")], [(_fit(header, width), "bold underline")]]
    if not s.runtimes:
        lines.append([("no runtime in this report" + (" matches the filter" if s.hidden_runtimes else ""), "dim")])
    ordered = sorted_runtimes(s.runtimes, by)
    shown = ordered if limit is None else ordered[: max(0, limit)]
    for r in shown:
        lines.append(_clip(_runtime_row(r, tag_w, shown_columns, note_w, util), width))
    if len(shown) < len(s.runtimes):
        lines.append([(f"... {len(s.runtimes) - len(shown)} more runtimes (press r)", "dim")])
    return lines


def _runtime_row(r: Runtime, tag_w: int, columns: list[TopColumn], note_w: int, util: bool = False) -> Line:
    line: Line = [
        (f"{_fit(r.tag, tag_w):<{tag_w}} ", "bold"),
        (f"{_fit('-' if r.pid is None else str(r.pid), 7):>7} ", ""),
        (f"{_fit(core_ranges(r.cores), 9):<9} ", ""),
    ]
    if util:
        line.append((f"{'-' if r.utilization is None else f'{r.utilization:.0f}%':>5} ", _style_for(r.utilization)))
    for column in columns:
        text, style = r.cells.get(column, (MISSING, ""))
        line.append((f"{_fit(text, column.width):{column.align}{column.width}} ", style))
    if r.error and note_w > 6:
        line.append((_fit(r.error, note_w), "red"))
    return line


def _error_lines(s: Screen, width: int, limit: int | None) -> list[Line]:
    if not s.errors:
        return []
    lines: list[Line] = [[(f"errors in the newest report ({len(s.errors)}):", "bold red")]]
    shown = s.errors if limit is None else s.errors[: max(0, limit - 1)]
    for e in shown:
        lines.append([(_fit("  " + e, width), "red")])
    if len(shown) < len(s.errors):
        lines.append([(f"  ... {len(s.errors) - len(shown)} more (neuron-monitor-top --once shows all)", "red")])
    return lines


def _help_lines(width: int) -> list[Line]:
    """The keys and what each does; a description longer than the room beside its key wraps onto the next lines
    (at 80 columns each is read whole: cropped, "report order" and "else scroll" were lost)."""
    indent = 2 + max(len(keys) for keys, _ in HELP) + 2
    room = width - indent
    lines: list[Line] = [[("keys", "bold underline")]]
    for keys, what in HELP:
        parts = textwrap.wrap(what, room) if room >= 20 else [what]
        lines.append(_clip([(f"  {keys:<{indent - 2}}", "bold"), (parts[0], "")], width))
        lines += [_clip([(" " * indent, ""), (part, "")], width) for part in parts[1:]]
    for part in textwrap.wrap(MEMORY_LEGEND, max(20, width - 2)):
        lines.append([(_fit("  " + part, width), "dim")])
    return lines


def _window(lines: list[Line], avail: int, scroll: int) -> list[Line]:
    """At most ``avail`` lines of a section, from ``scroll`` (clamped), with a marker when there is more."""
    if len(lines) <= avail:
        return lines
    if avail <= 1:
        return lines[:avail]
    head = lines[0]
    body = lines[1:]
    room = avail - 2
    start = max(0, min(scroll, len(body) - room))
    shown = body[start : start + room]
    below = len(body) - start - len(shown)
    marker = f"-- {start} above, {below} below (Up/Down, PgUp/PgDn) --"
    return [head, *shown, [(marker, "dim")]]


# ---- screens --------------------------------------------------------------------------------------------------


MAX_COLUMNS = 4096  # widest layout made: a terminal (or --width, COLUMNS) reporting more gets this many columns
MAX_ROWS = 4096  # tallest live layout made (--height, a terminal's rows)


def render(frame: Frame, width: int, height: int | None) -> list[Line]:
    """Lay out ``frame`` for a ``width`` x ``height`` terminal (``height=None``: everything, for --once); a size
    past ``MAX_COLUMNS`` x ``MAX_ROWS`` is laid out at that size (a frame's cost grows with its area).

    Once the newest report is stale (its age is red), nothing is green: a "healthy" verdict, an "ok" and a device
    number in the healthy colour are what the last report said, not what is known now, so they are shown dim."""
    width = min(max(20, width), MAX_COLUMNS)
    height = None if height is None else min(height, MAX_ROWS)
    lines = [_clip(line, width) for line in _render(frame, width, height)]
    if _stale(frame):
        lines = [[(text, _no_green(style)) for text, style in line] for line in lines]
    return lines


def _stale(frame: Frame) -> bool:
    """Whether the newest report is older than ``frame.stale_after`` (never for a replay: no ``now``)."""
    s = frame.screen
    if s is None or frame.now is None:
        return False
    at = s.report_time if s.report_time is not None else frame.received
    return at is not None and frame.now - at > frame.stale_after


def _no_green(style: str) -> str:
    return " ".join("dim" if word == "green" else word for word in style.split()) if "green" in style else style


def _render(frame: Frame, width: int, height: int | None) -> list[Line]:
    top = _title(frame, width)
    s = frame.screen
    if s is None:
        body = [[("waiting for the first report...", "bold")]]
        bottom = [[(_fit(m, width), "yellow")] for m in frame.messages]
        lines = top + body + bottom
        return lines if height is None else (lines + [[]] * height)[:height]
    if height is None:
        return _full(frame, s, width, top)
    top.append(_host(s, width))
    top.append(_tabs(frame, width))
    messages = [[(_fit(m, width), "bold yellow")] for m in frame.messages[-3:]]
    errors = _error_lines(s, width, max(2, height // 6))
    room = height - len(top) - len(messages) - len(errors)
    if room < 4:  # a tiny terminal: the errors yield to the view
        errors = errors[: max(0, len(errors) - (4 - room))]
        room = height - len(top) - len(messages) - len(errors)
    if frame.help:
        main = _window(_help_lines(width), room, 0)
    elif frame.view == "r":
        main = _window(_runtime_lines(s, width, by=frame.sort, util=True)[1:], room, frame.scroll)
    elif frame.view == "m":
        title, *models = _model_lines(s, width, frame.sort)
        main = [title, *_window(models, room - 1, frame.scroll)]
    else:
        history = frame.history
        scroll, details, selected = frame.scroll, [], None
        if frame.view == "d" and not s.devices:  # not an empty table: say so (the errors below say why)
            primary = [[("no Neuron devices in this report", "dim")]]
        elif frame.view == "d":
            primary = _device_lines(s, width) if history is None else _live_device_lines(s, width, history)
            health = _health_lines(s, width)
            selected = None if frame.selected is None or not s.devices else min(frame.selected, len(s.devices) - 1)
            if selected is not None:
                primary[1 + selected] = _cursor(primary[1 + selected])
                details = _selection_lines(s, s.devices[selected], width, max(2, room // 4))
            primary = [*primary[:1], *health, *primary[1:]]  # the reasons stay in view
        else:
            primary = _core_lines(s, width, history)
        # the runtimes keep a few rows below (title, header, two rows or a "more" line) when the view is long
        keep = min(room // 3, 5 + min(1, len(s.runtimes))) if history is not None else 0
        avail = max(3, room - keep - len(details))
        if frame.view == "d" and selected is not None and len(primary) > avail:  # the table follows the cursor
            scroll = max(0, len(health) + selected - (avail - 2) + 1)
        main = [*_window(primary, avail, scroll), *details]
        spare = room - len(main) - 1
        graphs: list[Line] = []
        if history is not None:
            # braille graphs as high as the rows left allow (3, 2 or 1), the runtimes still all below them
            count = _graph_count(s, history)
            tall = [r for r in (3, 2, 1) if spare - (1 + count * r) - 1 >= 3 + len(s.runtimes)]
            if count and tall:
                rows = tall[0] if frame.graph == "braille" else 0
                graphs = _history_lines(s, width, history, frame.period, rows)
        if graphs:
            main = [*main, [], *graphs]
            spare -= len(graphs) + 1
        if spare >= 4:
            main = [*main, [], *_runtime_lines(s, width, limit=spare - 3, by=frame.sort, util=True)]
    lines = top + main
    lines += [[]] * max(0, height - len(lines) - len(messages) - len(errors))
    return (lines + messages + errors)[:height]


def _full(frame: Frame, s: Screen, width: int, top: list[Line]) -> list[Line]:
    lines = [*top, _host(s, width), []]
    if s.devices:
        lines += [*_device_lines(s, width), [(_fit(MEMORY_LEGEND, width), "dim")], []]
        lines += [*_core_lines(s, width), []]
    lines += _runtime_lines(s, width)
    errors = _error_lines(s, width, None)
    if errors:
        lines += [[], *errors]
    if frame.messages:
        lines += [[], *[[(_fit(m, width), "bold yellow")] for m in frame.messages]]
    return lines
