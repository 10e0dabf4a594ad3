from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .podresources_server import FakeKubelet


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # unix socket paths are limited to 107 bytes: keep them short, not under pytest's long tmp_path
    d = Path(tempfile.mkdtemp(prefix="nmk-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir: Path) -> Iterator[FakeKubelet]:
    server = FakeKubelet(str(sock_dir / "kubelet.sock")).start()
    yield server
    server.stop()
