"""Makes the captures in tests/captures/ from the simulator: one per simulated shape (and per simulated driver
layout given with ``--driver``), each of a paused simulated host, so its moment holds still.

    python -m tests.captures.make_captures [--shape SHAPE ...] [--driver VERSION]

Each is written as ``<shape>[-<driver>].tar.gz`` beside this file by a real ``neuron-monitor --capture`` process.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from neuron_monitor.sim.shapes import SHAPES
from neuron_monitor.sim.temporary import TemporarySimulator
from tests.conftest import daemon_cmd

HERE = Path(__file__).parent


def make(shape: str, driver: str | None = None, runtimes: int = 2, seed: int = 1) -> Path:
    name = f"{shape}-{driver}" if driver else shape
    target = HERE / f"{name}.tar.gz"
    options = {"driver": driver} if driver else {}
    with TemporarySimulator(shape, runtimes=runtimes, seed=seed, **options) as sim:
        sim.pause()
        subprocess.run(daemon_cmd("--root", str(sim.root), "--capture", str(target), "--no-imds"), check=True,
                       timeout=300)  # fmt: skip
    return target


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shape", action="append", help="a simulated shape (default: every one)")
    p.add_argument("--driver", help="a simulated driver version or layout")
    args = p.parse_args()
    for shape in args.shape or sorted(SHAPES):
        path = make(shape, args.driver)
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
