"""Reading stdin on the exporter's event loop (``StdinIngest``): pipes read without blocking and coalesced, a
line decoded and applied per turn of the loop, end of input once, and the thread fallback for a regular file; and the
label guard that spares walking reports for over-long strings."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from fcntl import F_GETPIPE_SZ, F_SETPIPE_SZ
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.exporters.prometheus.families import GAUGE, Family
from neuron_monitor.exporters.prometheus.ingest import (
    LARGE_REPORT,
    LONG_TICKS,
    PIPE_GROWN,
    PIPE_SHARE,
    READ_EARLY,
    READ_EVERY,
    SHORT_LINES_PER_TURN,
    STALE_SHARE,
    TICK_LINES,
    StdinIngest,
    read_every_for,
)
from neuron_monitor.exporters.prometheus.labelcap import LabelGuard
from neuron_monitor.schema.stream import ReportStream

DEADLINE = 30.0


def _line(i: int, pad: int = 0) -> bytes:
    """A report line of ``report_time`` 1.7e9 + ``i``, made longer by ``pad`` bytes of padding when asked."""
    report: dict[str, Any] = {"system_data": None, "report_time": 1.7e9 + i}
    if pad:
        report["pad"] = "x" * pad
    return orjson.dumps(report) + b"\n"


@contextlib.contextmanager
def _attached(
    read_every: float,
) -> Iterator[tuple[asyncio.AbstractEventLoop, StdinIngest, list[float], list[int], int, int]]:
    """A pipe and a new event loop, and a `StdinIngest` of the pipe's read end attached to that loop: (the loop, the
    ingest, the report times it applied, its ends of input, the read end, the write end). The test closes the write
    end itself (end of input is part of what it tests); the loop is closed on the way out."""
    r, w = os.pipe()
    loop = asyncio.new_event_loop()
    try:
        with os.fdopen(r, "rb", buffering=0) as reader:
            ingest, applied, eofs = _ingest(reader, read_every=read_every)
            ingest.attach(loop)
            yield loop, ingest, applied, eofs, r, w
    finally:
        loop.close()


def _run_until(loop: asyncio.AbstractEventLoop, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        loop.run_until_complete(asyncio.sleep(0.01))


def _ingest(fileobj: Any, read_every: float = 0.25) -> tuple[StdinIngest, list[float], list[int]]:
    applied: list[float] = []
    eofs: list[int] = []
    stream = ReportStream(fileobj)
    ingest = StdinIngest(
        fileobj, stream, lambda r, _line: applied.append(r["report_time"]), lambda: eofs.append(1), read_every
    )
    return ingest, applied, eofs


def test_a_pipe_is_read_on_the_loop_and_small_reports_coalesce_by_tick() -> None:
    with _attached(3600.0) as (loop, ingest, applied, eofs, r, w):  # ticks never come within the test
        assert ingest.polled and not os.get_blocking(r)
        os.write(w, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])  # the first report after a pause wakes the loop
        assert ingest.next_tick is not None  # coalescing: the next read is a tick
        os.write(w, _line(1) + _line(2)[:10])
        loop.run_until_complete(asyncio.sleep(0.05))
        assert applied == [1.7e9]  # within a tick: not read until the tick
        ingest.read_every = 0.01
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # what the tick does
        _run_until(loop, lambda: applied == [1.7e9, 1.7e9 + 1])  # the torn third line waits for its end
        os.write(w, _line(2)[10:])
        os.close(w)
        _run_until(loop, lambda: eofs == [1])
        assert applied == [1.7e9, 1.7e9 + 1, 1.7e9 + 2]
        loop.run_until_complete(asyncio.sleep(0.05))
        assert eofs == [1]
        ingest.restore()
        assert os.get_blocking(r)


def test_a_turn_awake_anyway_takes_the_next_ticks_read_early() -> None:
    with _attached(3600.0) as (loop, ingest, applied, eofs, _r, w):  # ticks never come within the test
        os.write(w, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])
        tick = ingest.next_tick
        assert tick is not None
        os.write(w, _line(1) + _line(2))
        ingest.read_early()  # the tick is an hour away: more than READ_EARLY x read_every, it stays
        assert applied == [1.7e9] and ingest.next_tick == tick
        ingest.read_every = 3600.0 / READ_EARLY + 60.0  # now the tick is less than READ_EARLY x read_every away
        ingest.read_early()  # read, decoded and applied in this call (the turn of the response it rides on)
        assert applied == [1.7e9, 1.7e9 + 1, 1.7e9 + 2]
        new_tick = ingest.next_tick
        assert new_tick is not None and new_tick > tick  # the next read is a tick counted from this read
        ingest.read_every = 3600.0 * 1e6
        ingest.read_early()  # the pipe holds nothing: the tick stays as it was
        assert ingest.next_tick == new_tick and applied == [1.7e9, 1.7e9 + 1, 1.7e9 + 2]
        os.write(w, _line(3))
        os.close(w)
        ingest.read_early()  # the last line (a read that filled less than CHUNK stops there)
        assert applied == [1.7e9 + i for i in range(4)] and eofs == []
        ingest.read_every = 3600.0 * 1e7
        ingest.read_early()  # end of input, handed on in the next turn of the loop, once
        _run_until(loop, lambda: eofs == [1])
        assert ingest.next_tick is None
        loop.run_until_complete(asyncio.sleep(0.05))
        ingest.read_early()
        assert eofs == [1] and len(applied) == 4


def test_a_large_report_is_not_read_early() -> None:
    with _attached(1e9) as (loop, ingest, applied, _, _r, w):
        big = _line(0, LARGE_REPORT)
        fcntl.fcntl(w, F_SETPIPE_SZ, 64 * 1024)  # too small to hold a tick's long reports (shrunk by the writer)
        writer = threading.Thread(target=os.write, args=(w, big))
        writer.start()
        _run_until(loop, lambda: applied == [1.7e9])
        writer.join()
        assert ingest.next_tick is None  # large reports are read as they arrive, by the loop's reader
        os.write(w, _line(1))
        ingest.read_early()  # no tick to take early: the reader reads it on the loop
        assert applied == [1.7e9]
        _run_until(loop, lambda: applied == [1.7e9, 1.7e9 + 1])
        os.close(w)


def test_small_reads_coalesce_only_while_the_pipe_stays_far_from_full() -> None:
    with _attached(3600.0) as (loop, ingest, applied, _, r, w):
        size = fcntl.fcntl(r, F_GETPIPE_SZ)  # as grown by attach
        lines = [_line(i, 1000) for i in range(2000)]
        many = lines[: size // PIPE_SHARE // len(lines[0]) + 2]
        assert PIPE_SHARE * len(b"".join(many)) > size > len(b"".join(many))
        os.write(w, b"".join(many))  # one read takes more than 1/PIPE_SHARE of the pipe: no coalescing
        _run_until(loop, lambda: len(applied) == len(many))
        assert ingest.next_tick is None  # the loop's reader is armed: each report read as it arrives
        os.write(w, _line(1000))
        _run_until(loop, lambda: applied[-1] == 1.7e9 + 1000)
        assert ingest.next_tick is not None  # a small read again: the next read is a tick
        os.close(w)


def test_a_long_reports_tick_is_not_taken_early() -> None:
    with _attached(1e9) as (loop, ingest, applied, _, r, w):
        big = [_line(i, LARGE_REPORT) for i in range(2)]
        assert fcntl.fcntl(r, F_GETPIPE_SZ) >= TICK_LINES * len(big[0]) * 4  # grown: long reports coalesce
        writer = threading.Thread(target=os.write, args=(w, big[0]))
        writer.start()
        _run_until(loop, lambda: applied == [1.7e9])
        writer.join()
        tick = ingest.next_tick
        assert tick is not None  # the next long report waits for its tick
        writer = threading.Thread(target=os.write, args=(w, big[1]))
        writer.start()
        writer.join()
        ingest.read_every = 1e12  # the tick would now be well inside READ_EARLY x read_every
        ingest.read_early()  # a long report's tick stays: nothing read
        assert applied == [1.7e9] and ingest.next_tick == tick
        os.close(w)


def test_long_reports_tick_long_ticks_times_as_often_as_small_ones() -> None:
    """A long report's next read is a tick ``read_every / LONG_TICKS`` away (0.25 s: a tick's long reports fit the
    pipe, docs/prometheus.md), a small report's a whole ``read_every`` away. Only the timers' due times are compared
    (set when the last read's lines were applied), never how long anything took."""
    every = 1e9  # ticks never come within the test
    big = _line(0, LARGE_REPORT)
    with _attached(every) as (loop, ingest, applied, _, r, w):
        assert fcntl.fcntl(r, F_GETPIPE_SZ) >= TICK_LINES * len(big) * PIPE_SHARE  # grown: long reports coalesce
        os.write(w, big)
        _run_until(loop, lambda: applied == [1.7e9])
        tick = ingest.next_tick
        assert tick is not None and ingest.large
        assert tick - loop.time() <= every / LONG_TICKS  # a long report's tick
        os.write(w, _line(1))
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # what the tick does: the small report is read and applied
        _run_until(loop, lambda: applied == [1.7e9, 1.7e9 + 1])
        tick = ingest.next_tick
        assert tick is not None and not ingest.large
        assert tick - loop.time() > every / LONG_TICKS  # a small report's tick: read_every away
        os.close(w)


def test_an_early_read_that_took_much_of_the_pipe_arms_the_reader() -> None:
    """``read_early``'s read counts for the pipe rule like a tick's: one that took more than 1/``PIPE_SHARE`` of the
    pipe's buffer ends coalescing (the reader is armed, each report read as it arrives)."""
    with _attached(3600.0) as (loop, ingest, applied, _, _r, w):
        size = fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # one page (shrunk by the writer)
        assert PIPE_SHARE * len(_line(0)) <= size < PIPE_SHARE * 40 * len(_line(1))  # 40 lines: over a quarter
        os.write(w, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])
        assert ingest.next_tick is not None  # a small read: coalescing
        os.write(w, b"".join(_line(i) for i in range(1, 41)))  # 40 lines: over a quarter of the pipe
        ingest.read_every = 3600.0 / READ_EARLY + 60.0  # the tick is now within READ_EARLY x read_every
        ingest.read_early()
        _run_until(loop, lambda: len(applied) == 41)
        _run_until(loop, lambda: not ingest.busy)
        assert applied == [1.7e9 + i for i in range(41)]
        assert ingest.next_tick is None  # the reader is armed: no tick
        os.close(w)


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False))
def test_ticks_never_exceed_a_share_of_the_stale_floor(floor: float) -> None:
    every = read_every_for(floor)
    assert 0 < every <= READ_EVERY and every <= floor / STALE_SHARE
    assert every == READ_EVERY or every == floor / STALE_SHARE


def test_the_publisher_hears_when_a_read_is_counted_and_the_next_waits_for_a_tick() -> None:
    r, w = os.pipe()
    loop = asyncio.new_event_loop()
    with os.fdopen(r, "rb", buffering=0) as reader:
        ingest, applied, _ = _ingest(reader, read_every=3600.0)
        paused: list[tuple[float, int]] = []
        ingest.paused = lambda until: paused.append((until, len(applied)))
        ingest.attach(loop)
        os.write(w, _line(0) + _line(1))
        _run_until(loop, lambda: len(applied) == 2 and bool(paused))
        assert paused == [(ingest.next_tick, 2)]  # once, after the read's last report, with the tick's time
        os.close(w)
    loop.close()


def _turns(lines: list[bytes]) -> list[object]:
    """The reports' times as applied, with "request" where a callback queued at the first apply ran."""
    r, w = os.pipe()
    loop = asyncio.new_event_loop()
    events: list[object] = []
    with os.fdopen(r, "rb", buffering=0) as reader:
        stream = ReportStream(reader)

        def apply(report: dict[str, Any], line: bytes | None) -> None:
            events.append(report["report_time"])
            if len(events) == 1:
                loop.call_soon(events.append, "request")  # what a request arriving meanwhile gets

        ingest = StdinIngest(reader, stream, apply, lambda: events.append("eof"))
        ingest.attach(loop)
        writer = threading.Thread(target=lambda: (os.write(w, b"".join(lines)), os.close(w)))
        writer.start()
        _run_until(loop, lambda: "eof" in events)
        writer.join()
    loop.close()
    return events


def test_each_long_line_is_decoded_and_applied_in_its_own_turn_of_the_loop() -> None:
    """A read of several long reports never holds the loop for all of them: a callback scheduled meanwhile runs
    between two steps (issue 41: a scrape waits for one step at most)."""
    lines = [_line(i, LARGE_REPORT) for i in range(3)]
    assert _turns(lines) == [1.7e9, "request", 1.7e9 + 1, 1.7e9 + 2, "eof"]


def test_short_lines_of_a_read_are_applied_a_few_per_turn_of_the_loop() -> None:
    """Short reports (host-only ones, tens of microseconds each) are applied up to ``SHORT_LINES_PER_TURN`` in one
    turn: a callback scheduled at the first runs after them, before the rest."""
    times = [1.7e9 + i for i in range(SHORT_LINES_PER_TURN + 2)]
    events = _turns([_line(i) for i in range(len(times))])
    assert events == [*times[:SHORT_LINES_PER_TURN], "request", *times[SHORT_LINES_PER_TURN:], "eof"]


def test_large_reports_coalesce_by_tick_while_the_pipe_holds_them() -> None:
    """The pipe is grown (as the daemon grows its stdout) so that a tick's long reports wait in it; the first report
    after a pause wakes the loop at once, the next waits for the tick and is then read with the rest."""
    big = _line(0, 20_000)
    with _attached(3600.0) as (loop, ingest, applied, _, r, w):  # ticks never come within the test
        assert ingest._pipe_bytes == fcntl.fcntl(r, F_GETPIPE_SZ) >= PIPE_GROWN, "pipe-max-size below 1 MiB?"
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 1)  # the first report after a pause: at once
        assert ingest.large
        assert ingest.next_tick is not None  # coalescing: the next read is a tick
        os.write(w, big + big)
        loop.run_until_complete(asyncio.sleep(0.05))
        assert len(applied) == 1  # within a tick: not read until the tick
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # what the tick does
        _run_until(loop, lambda: len(applied) == 3)
        os.close(w)


def test_large_reports_are_applied_as_they_arrive_when_the_pipe_cannot_hold_a_ticks_worth() -> None:
    """A pipe that could not be grown (pipe-max-size), or a socket: long reports are read as they arrive, so the
    writer never waits for a tick."""
    big = _line(0, 20_000)
    with _attached(3600.0) as (loop, ingest, applied, _, _r, w):
        assert fcntl.fcntl(w, F_SETPIPE_SZ, 64 * 1024) < TICK_LINES * len(big)  # as if growing had been refused
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 1)
        assert ingest.large
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 2)  # the loop's reader stays armed: no tick to wait for
        assert ingest.next_tick is None
        os.close(w)


def test_a_pipe_shrunk_by_its_writer_stops_long_reports_coalescing() -> None:
    """The pipe's size is read again before each tick: a writer that shrinks the pipe the exporter grew (it may
    resize it too) makes long reports be read as they arrive again, so it never waits for a tick it has no room
    for."""
    big = _line(0, 20_000)
    with _attached(3600.0) as (loop, ingest, applied, _, _r, w):
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 1)
        assert ingest.next_tick is not None  # the grown pipe holds a tick's long reports
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # reads nothing: the loop's reader is armed again
        assert fcntl.fcntl(w, F_SETPIPE_SZ, 64 * 1024) < TICK_LINES * len(big)  # the writer shrinks it
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 2)
        assert ingest.next_tick is None  # no room for a tick's worth: read as they arrive
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 3)
        os.close(w)


def test_a_long_line_streaming_in_is_read_as_it_arrives() -> None:
    """A line already ``LARGE_REPORT`` bytes long while it streams in is read at the pipe's speed, not per tick,
    even while long reports coalesce."""
    big = _line(0, 20_000)
    with _attached(3600.0) as (loop, ingest, applied, _, _r, w):
        os.write(w, big)
        _run_until(loop, lambda: len(applied) == 1)
        assert ingest.next_tick is not None
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # reads nothing: the loop's reader is armed again
        os.write(w, big[: LARGE_REPORT + 10])
        _run_until(loop, lambda: ingest.lines.pending >= LARGE_REPORT)
        loop.run_until_complete(asyncio.sleep(0.02))
        assert ingest.next_tick is None  # streaming in: the reader stays armed
        os.write(w, big[LARGE_REPORT + 10 :])
        _run_until(loop, lambda: len(applied) == 2)
        os.close(w)


def test_reports_keep_flowing_between_requests() -> None:
    with _attached(0.05) as (loop, _stdin, applied, _, _r, w):
        for i in range(20):
            os.write(w, _line(i))
            loop.run_until_complete(asyncio.sleep(0.01))
        _run_until(loop, lambda: len(applied) == 20)
        assert applied == [1.7e9 + i for i in range(20)]
        os.close(w)


def test_a_regular_file_is_read_by_a_thread() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"".join(_line(i) for i in range(5)) + b"not json\n")
        f.seek(0)
        loop = asyncio.new_event_loop()
        reader = io.BufferedReader(f.raw if hasattr(f, "raw") else f)  # type: ignore[arg-type]
        ingest, applied, eofs = _ingest(reader)
        ingest.attach(loop)
        assert not ingest.polled
        _run_until(loop, lambda: eofs == [1])
        assert applied == [1.7e9 + i for i in range(5)]
        assert ingest.stream.stats.bad_lines == 1 and ingest.stream.stats.eof
        loop.close()


def test_a_terminal_is_read_as_it_becomes_readable_never_on_a_tick() -> None:
    """A terminal on stdin stays blocking (``restore`` has nothing to undo), so it must never be read on a tick: a
    blocking read of a terminal with nothing typed would stall the loop and every scrape with it. Each line is read
    when the terminal becomes readable, and a line typed later is read too."""
    master, slave = os.openpty()
    loop = asyncio.new_event_loop()
    with os.fdopen(slave, "rb", buffering=0) as reader:
        ingest, applied, _ = _ingest(reader, read_every=3600.0)
        ingest.attach(loop)
        assert ingest.polled and os.get_blocking(slave)
        os.write(master, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])
        assert ingest.next_tick is None  # the loop's reader stays armed: no tick
        os.write(master, _line(1))
        _run_until(loop, lambda: applied == [1.7e9, 1.7e9 + 1])
        assert ingest.next_tick is None and os.get_blocking(slave)
        ingest._unarm()
    os.close(master)
    loop.close()


def test_paused_hears_of_a_tick_only_when_the_next_read_waits_for_one() -> None:
    """``paused`` (cli: ``Publisher.reads_paused``) is called with the next tick's time when a read's lines are all
    counted and the next read waits for that tick; when the loop's reader is armed instead (no tick) it is not
    called, and nothing raises on the loop."""
    r, w = os.pipe()
    loop = asyncio.new_event_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    with os.fdopen(r, "rb", buffering=0) as reader:
        ingest, applied, _ = _ingest(reader, read_every=3600.0)
        told: list[float] = []
        ingest.paused = told.append
        ingest.attach(loop)
        os.write(w, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])
        assert told == [ingest.next_tick] and told[0] is not None
        size = fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # one page (shrunk by the writer)
        many = b"".join(_line(i) for i in range(1, 41))
        assert PIPE_SHARE * len(many) > size > len(many)  # a read of them all: over a quarter of the pipe
        os.write(w, many)
        ingest._timer.cancel()  # type: ignore[union-attr]
        ingest._tick()  # what the tick does
        _run_until(loop, lambda: len(applied) == 41 and not ingest.busy)
        assert ingest.next_tick is None  # the reader is armed: no tick to tell of
        assert len(told) == 1 and errors == []
        os.close(w)
    loop.close()


def test_label_guard_checks_new_series_only() -> None:
    guard = LabelGuard(16)
    fam = Family("f", GAUGE, "h", ("a",), {("short",): 1.0})
    assert not guard.too_long([fam])
    assert guard.too_long([Family("f", GAUGE, "h", ("a",), {("x" * 17,): 1.0})])
    assert not guard.too_long([Family("f", GAUGE, "h", ("a",), {("x" * 16,): 1.0})])
    assert not guard.too_long([Family("g", GAUGE, "h", (), {(): 1.0})])
    assert not LabelGuard(0).too_long([Family("f", GAUGE, "h", ("a",), {("x" * 99,): 1.0})])


def test_steps_wait_while_a_scrape_is_due() -> None:
    """``hold`` (the publisher's: a scrape is due) keeps the next decode or apply step until the loop time it
    names; the line is applied after that, not lost."""
    r, w = os.pipe()
    loop = asyncio.new_event_loop()
    with os.fdopen(r, "rb", buffering=0) as reader:
        ingest, applied, _ = _ingest(reader)
        holds: list[tuple[float, float]] = []  # (asked at, held until)

        def hold(now: float) -> float | None:
            if not holds:
                holds.append((now, now + 0.2))
                return now + 0.2
            return None

        ingest.hold = hold
        applied_at: list[float] = []
        apply = ingest.apply
        ingest.apply = lambda report, line: (applied_at.append(loop.time()), apply(report, line))
        ingest.attach(loop)
        os.write(w, _line(0))
        _run_until(loop, lambda: applied == [1.7e9])
        assert len(holds) == 1 and applied_at[0] >= holds[0][1]
    os.close(w)
    loop.close()
