"""util/pipes.py on real pipes: grown to a power of two, capped at pipe-max-size, never shrunk."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from neuron_monitor.util.pipes import grow_pipe, pipe_max_size, pipe_size


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def test_grown_to_the_next_power_of_two(pipe: tuple[int, int]) -> None:
    r, w = pipe
    assert pipe_size(w) == 64 * 1024  # Linux's default
    assert grow_pipe(w, 100_000) == 128 * 1024 == pipe_size(r)  # both ends see the one buffer


def test_never_shrunk(pipe: tuple[int, int]) -> None:
    r, w = pipe
    big = grow_pipe(r, 512 * 1024)
    assert big == 512 * 1024
    assert grow_pipe(w, 70_000) == big == pipe_size(w)


def test_capped_at_pipe_max_size(pipe: tuple[int, int]) -> None:
    _, w = pipe
    assert grow_pipe(w, pipe_max_size() * 8) == pipe_max_size()


def test_not_a_pipe_raises() -> None:
    with tempfile.TemporaryFile() as f, pytest.raises(OSError):
        grow_pipe(f.fileno(), 1 << 20)
