"""LineWriter: direct writes when they cannot block, the writer thread otherwise, EPIPE as ReaderGone."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from fcntl import F_GETPIPE_SZ, F_SETPIPE_SZ
from pathlib import Path

import pytest

from neuron_monitor.daemon.output import LineWriter, ReaderGone
from neuron_monitor.util.pipes import PIPE_MAX_SIZE


def _read_exactly(r: int, n: int) -> bytes:
    """The next ``n`` bytes of the pipe ``r`` (blocking reads, as many as it takes)."""
    got = bytearray()
    while len(got) < n:
        got += os.read(r, 1 << 20)
    return bytes(got)


async def test_small_lines_to_a_pipe_with_room_are_written_directly() -> None:
    r, w = os.pipe()
    writer = LineWriter(w)
    await writer.write(b"a\n")
    await writer.write(b"b\n")
    assert os.read(r, 100) == b"\na\nb\n"  # the first line starts fresh (resync after a torn line)
    assert writer.direct_writes == 2
    writer.close()
    os.close(r)
    os.close(w)


async def test_a_line_larger_than_the_free_pipe_space_waits_in_the_thread_for_the_reader() -> None:
    r, w = os.pipe()
    writer = LineWriter(w)
    big = b"x" * (1 << 20) + b"\n"  # larger than any pipe buffer: must not block the event loop
    await writer.write(b"first\n")
    assert os.read(r, 100) == b"\nfirst\n"
    task = asyncio.create_task(writer.write(big))
    await asyncio.sleep(0.05)
    assert not task.done()  # blocked on the reader ...
    ticks = 0
    for _ in range(5):  # ... while the loop keeps running
        await asyncio.sleep(0.01)
        ticks += 1
    got = bytearray()

    def drain() -> None:
        while len(got) < len(big):
            got.extend(os.read(r, 65536))

    t = threading.Thread(target=drain)
    t.start()
    await asyncio.wait_for(task, 10)
    t.join()
    assert bytes(got) == big and ticks == 5
    assert writer.direct_writes == 1  # the first, short line
    writer.close()
    os.close(r)
    os.close(w)


async def test_reader_gone_raises() -> None:
    r, w = os.pipe()
    os.close(r)
    writer = LineWriter(w)
    with pytest.raises(ReaderGone):
        await writer.write(b"line\n")
    writer.close()
    os.close(w)


async def test_recorder_gets_every_line_through_the_thread(tmp_path) -> None:
    class Sink:
        def __init__(self) -> None:
            self.lines: list[bytes] = []

        def append(self, line: bytes) -> None:
            self.lines.append(line)

        def close(self) -> None:
            pass

    sink = Sink()
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    writer = LineWriter(fd, sink)
    for i in range(3):
        await writer.write(b"%d\n" % i)
    assert sink.lines == [b"0\n", b"1\n", b"2\n"]
    assert (tmp_path / "out").read_bytes() == b"\n0\n1\n2\n"  # the recording has no resync newline
    writer.close()
    os.close(fd)


async def test_a_pipe_too_small_for_the_lines_is_grown_once() -> None:
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 65536)
    writer = LineWriter(w)
    line = b"y" * 80_000 + b"\n"  # a trn2.48xlarge report with 16 runtimes is about this long
    await writer.write(b"first\n")
    assert os.read(r, 100) == b"\nfirst\n"
    writer.direct_writes = 0
    await writer.write(line)
    assert writer.direct_writes == 1  # went out at once: the pipe now holds several such lines
    assert fcntl.fcntl(w, F_GETPIPE_SZ) >= min(4 * len(line), int(Path(PIPE_MAX_SIZE).read_text()))
    assert _read_exactly(r, len(line)) == line
    writer.close()
    os.close(r)
    os.close(w)


async def test_a_pipe_its_reader_grew_is_never_shrunk() -> None:
    """The exporter grows its stdin (this pipe) to 1 MiB when it starts, maybe after our first line; a longer line
    later must not set the pipe back to the smaller size this writer would have asked for (the exporter sizes its
    coalescing by the grown pipe: a shrunk one would fill and make the daemon skip slots)."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 65536)
    writer = LineWriter(w)
    await writer.write(b"first\n")  # the writer sees a 64 KiB pipe
    assert os.read(r, 100) == b"\nfirst\n"
    grown = fcntl.fcntl(r, F_SETPIPE_SZ, min(1 << 20, int(Path(PIPE_MAX_SIZE).read_text())))  # as the exporter does
    line = b"y" * 80_000 + b"\n"  # would ask for 512 KiB
    await writer.write(line)
    assert fcntl.fcntl(w, F_GETPIPE_SZ) == grown
    assert _read_exactly(r, len(line)) == line
    writer.close()
    os.close(r)
    os.close(w)


def test_direct_writes_never_block_on_a_pipe_full_of_unread_lines() -> None:
    """A pipe's room is in page slots: 16 unread 3.3 KB lines fill a 64 KiB pipe that holds only 53 KB. A direct
    write that blocked there would stall the event loop (and SIGTERM with it); the writer thread must take it."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 65536)
    line = b"z" * 3300 + b"\n"
    writer = LineWriter(w)
    sent: list[int] = []

    async def fill() -> None:
        while True:
            before = writer.direct_writes
            task = asyncio.get_running_loop().create_task(writer.write(line))
            await asyncio.sleep(0)
            if writer.direct_writes == before:  # went to the writer thread, which waits for the reader
                break
            await task
            sent.append(1)
        got = bytearray()
        while len(got) < (len(sent) + 1) * len(line) + 1:  # and the resync newline
            got += await asyncio.to_thread(os.read, r, 1 << 20)
        await task
        assert bytes(got) == b"\n" + line * (len(sent) + 1)

    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(fill())
        except BaseException as e:
            errors.append(e)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "a direct write blocked the event loop"
    assert not errors, errors
    assert len(sent) >= 4  # the fast path still serves a reader that keeps up
    writer.close()
    os.close(r)
    os.close(w)


async def test_a_torn_line_left_by_a_killed_writer_loses_no_report() -> None:
    """kill -9 mid-write leaves half a line in the pipe; the restarted writer's first report still parses."""
    r, w = os.pipe()
    os.write(w, b'{"neuron_runtime_data": [], "system_da')  # the previous daemon, killed mid-line
    writer = LineWriter(w)
    await writer.write(b'{"report_time": 1}\n')
    lines = os.read(r, 1000).split(b"\n")
    assert lines[1] == b'{"report_time": 1}'  # its own line, after the torn one
    writer.close()
    os.close(r)
    os.close(w)
