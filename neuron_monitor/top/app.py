"""The live view: a `Viewer` (what the sources feed, what the keys change) and the loop that draws it.

`Viewer` is the `Feed` of every source. It keeps the newest report, notices runtimes that vanished since the
previous report, and keeps the input's problems (a broken line, an ended stream, a stalled daemon) on screen for
a while. `Viewer.frame` builds the `Frame` to lay out; it is pure given the clock, so tests drive it directly.
`run_live` owns the terminal (via `FullScreen`) until q, SIGTERM or SIGINT, then restores it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any

from neuron_monitor.schema.read import read_report
from neuron_monitor.top.controls import ViewState, decode
from neuron_monitor.top.history import History
from neuron_monitor.top.layout import Frame, render
from neuron_monitor.top.model import Screen, screen_from_report
from neuron_monitor.top.sources import Feed, Replay
from neuron_monitor.util import early_signals
from neuron_monitor.util.stopping import StopDeadline

MESSAGE_SECONDS = 30.0  # how long a problem stays on screen
REDRAW_INTERVAL = 1.0  # the age ticks at least this often (each frame costs CPU: bench_top --live)
MIN_STALE = 5.0  # seconds without a report before it is called stale (or 3 report intervals, if longer)


class Viewer:
    """Feed of the sources and model of the live view."""

    def __init__(self, source: str, state: ViewState | None = None, replay: Replay | None = None) -> None:
        self.source = source
        self.state = state or ViewState()
        self.replay = replay
        self.report_obj: dict[str, Any] | None = None
        self._screen: Screen | None = None
        self._pids: dict[int, str] = {}
        self._messages: list[tuple[float, str]] = []  # (monotonic expiry, text)
        self._ended = ""
        self.last_arrival: float | None = None
        self.received: float | None = None  # wall clock of the newest report's arrival
        self.interval = 1.0
        self.history = History()
        self.dirty = True
        self.full_redraw = False  # Ctrl-L: the next frame sends every row, not only the changed ones

    # -- Feed --------------------------------------------------------------------------------------------------

    def report(self, report: dict[str, Any], track: bool = True) -> None:
        now = time.monotonic()
        if track and self.last_arrival is not None:
            gap = now - self.last_arrival
            self.interval = 0.7 * self.interval + 0.3 * gap if self.report_obj else gap
        self.last_arrival = now
        self.received = time.time()
        pids = _runtime_pids(report)
        if track:
            for pid, tag in self._pids.items():
                if pid not in pids:
                    self.problem(f"runtime {tag} (pid {pid}) is gone: it is no longer in the reports")
        self._pids = pids
        self.report_obj = report
        self._screen = None
        screen = self.screen()
        if screen is not None:
            at = screen.report_time
            self.history.add(screen, at=at if at is not None else self.received)
        self.dirty = True

    def problem(self, text: str) -> None:
        self._messages = [(e, t) for e, t in self._messages if not t.startswith(text[:24])]
        self._messages.append((time.monotonic() + MESSAGE_SECONDS, text))
        del self._messages[:-5]
        self.dirty = True

    def ended(self, text: str) -> None:
        self._ended = text
        self.dirty = True

    # -- view --------------------------------------------------------------------------------------------------

    def screen(self) -> Screen | None:
        if self._screen is None and self.report_obj is not None:
            self._screen = screen_from_report(self.report_obj, self.state.tag_filter)
        return self._screen

    def refilter(self) -> None:
        self._screen = None
        self.dirty = True

    def messages(self, now_mono: float) -> tuple[str, ...]:
        out = [t for e, t in self._messages if e > now_mono]
        self._messages = [(e, t) for e, t in self._messages if e > now_mono]
        if self.replay is None and not self._ended and self.last_arrival is not None:
            quiet = now_mono - self.last_arrival
            if quiet > max(MIN_STALE, 3 * self.interval):
                out.append(f"no new report for {quiet:.0f}s: the daemon may have stopped or stalled")
        if self.replay is not None:
            out = self.replay.problems[-2:] + out
        if self._ended:
            out.append(self._ended)
        if self.state.notice:
            out.append(self.state.notice)
        return tuple(out)

    def frame(self, now_wall: float, now_mono: float) -> Frame:
        st = self.state
        return Frame(
            screen=self.screen(),
            view=st.view,
            source=self.source,
            now=None if self.replay is not None else now_wall,
            received=None if self.replay is not None else self.received,
            position=self.replay.position() if self.replay is not None else "",
            messages=self.messages(now_mono),
            filter_text=st.filter_text,
            prompt=st.prompt,
            help=st.help,
            scroll=st.scroll,
            stale_after=max(MIN_STALE, 3 * self.interval),
            history=self.history,
            sort=st.sort,
            period=self.interval,
            selected=st.selected,
            graph=st.graph,
        )

    def press(self, key: str) -> str:
        """Apply a key; returns "quit" or ""; replay keys move the play head here."""
        before = self.state.filter_text
        action = self.state.press(key)
        self.dirty = True
        if action == "redraw":
            self.full_redraw = True
        screen = self.screen()
        if self.state.selected is not None and screen is not None and screen.devices:
            self.state.selected = min(self.state.selected, len(screen.devices) - 1)
        if self.state.filter_text != before:
            self.refilter()
        if action == "quit":
            return "quit"
        if self.replay is not None and action:
            self._replay_action(action)
        return ""

    def _replay_action(self, action: str) -> None:
        r = self.replay
        assert r is not None
        moves: dict[str, Callable[[], object]] = {
            "toggle": r.toggle,
            "back": lambda: r.step(-1),
            "forward": lambda: r.step(1),
            "seek-back": lambda: r.seek(-60.0),
            "seek-forward": lambda: r.seek(60.0),
            "first": r.first,
            "last": r.last,
            "faster": lambda: r.faster(2.0),
            "slower": lambda: r.faster(0.5),
        }
        if action in moves:
            moves[action]()
            self.report(r.current(), track=False)


def _runtime_pids(report: dict[str, Any]) -> dict[int, str]:
    return {e.pid: e.tag for e in read_report(report).runtimes if e.pid is not None}


class _MessageHandler(logging.Handler):
    """Shows the collection's warnings on screen instead of writing over it on stderr."""

    def __init__(self, viewer: Viewer) -> None:
        super().__init__(logging.WARNING)
        self.viewer = viewer

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.viewer.problem(record.getMessage())


async def run_live(
    viewer: Viewer,
    source_run: Callable[[Feed, asyncio.Event], Coroutine[Any, Any, None]] | None,
    keys_fd: int | None,
) -> int:
    """Own the terminal and show ``viewer`` until q, SIGTERM or SIGINT; returns the exit code (0)."""

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    wake = asyncio.Event()
    # A plain handler that interrupts system calls, not the loop's (whose SA_RESTART lets a write to a terminal
    # whose output is stopped, Ctrl-S, wait for good): the first stop also arms the 1.8 s watchdog, so top is gone
    # within 2 s even while a frame or the terminal's restoring cannot be written.
    watchdog = StopDeadline("neuron-monitor-top")

    def on_stop(signum: int, _frame: object) -> None:
        watchdog.arm(signal.Signals(signum).name)
        with contextlib.suppress(RuntimeError):  # the loop closed: the stop is already under way
            loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_stop)
        signal.siginterrupt(sig, True)
    loop.add_signal_handler(signal.SIGWINCH, wake.set)
    try:
        return await _run_live(viewer, source_run, keys_fd, loop, stop, wake)
    finally:
        watchdog.cancel()  # the terminal is restored: what is left (a simulator to stop) may take its time


async def _run_live(
    viewer: Viewer,
    source_run: Callable[[Feed, asyncio.Event], Coroutine[Any, Any, None]] | None,
    keys_fd: int | None,
    loop: asyncio.AbstractEventLoop,
    stop: asyncio.Event,
    wake: asyncio.Event,
) -> int:
    from neuron_monitor.top.terminal import FullScreen

    if early_signals.STOPPED:  # a stop while starting whose KeyboardInterrupt Python dropped (in a finalizer)
        return 0
    logger = logging.getLogger("neuron_monitor")
    handler = _MessageHandler(viewer)
    saved_handlers, saved_level = logger.handlers[:], logger.level
    logger.handlers[:] = [handler]
    logger.setLevel(logging.WARNING)
    logger.propagate = False

    def on_keys() -> None:
        assert keys_fd is not None
        try:
            data = os.read(keys_fd, 1024)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the terminal went away (hang-up)
            loop.remove_reader(keys_fd)
            stop.set()
            return
        for key in decode(data):
            if viewer.press(key) == "quit":
                stop.set()
        wake.set()

    tasks: list[asyncio.Task[Any]] = []
    try:
        with FullScreen(keys_fd) as screen:

            def suspend() -> None:  # Ctrl-Z: give the shell its terminal back, take it again on fg
                screen.__exit__(None, None, None)
                os.kill(os.getpid(), signal.SIGSTOP)
                screen.__enter__()
                viewer.dirty = True
                wake.set()

            loop.add_signal_handler(signal.SIGTSTP, suspend)
            if keys_fd is not None:
                loop.add_reader(keys_fd, on_keys)
            if source_run is not None:
                tasks.append(loop.create_task(source_run(viewer, stop)))
            if viewer.replay is not None:
                tasks.append(loop.create_task(_play(viewer, stop, wake)))
            last_draw = 0.0
            while not stop.is_set():
                now = time.monotonic()
                if viewer.dirty or now - last_draw >= REDRAW_INTERVAL or wake.is_set():
                    wake.clear()
                    viewer.dirty = False
                    width, height = screen.size()
                    if viewer.full_redraw:
                        viewer.full_redraw = False
                        screen.invalidate()
                    screen.draw(render(viewer.frame(time.time(), now), width, height))
                    last_draw = now
                waiters = [loop.create_task(stop.wait()), loop.create_task(wake.wait())]
                await asyncio.wait(waiters, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
                for w in waiters:
                    w.cancel()
    finally:
        stop.set()
        loop.remove_signal_handler(signal.SIGTSTP)
        if keys_fd is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(keys_fd)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(t, 1.0)
        logger.handlers[:] = saved_handlers
        logger.setLevel(saved_level)
    return 0


async def _play(viewer: Viewer, stop: asyncio.Event, wake: asyncio.Event) -> None:
    replay = viewer.replay
    assert replay is not None
    viewer.report(replay.current(), track=False)
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.05)
        now = time.monotonic()
        if replay.advance(now - last):
            viewer.report(replay.current(), track=False)
            wake.set()
        last = now
