"""Rendering a kustomize overlay with the real ``kubectl kustomize`` (the test skips where kubectl is missing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def build(overlay: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize overlay`` renders, in its order; fails with kubectl's message."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl (kustomize) not installed: make test-tools")
    got = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    return [d for d in yaml.safe_load_all(got.stdout) if d]
