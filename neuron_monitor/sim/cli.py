"""``neuron-monitor-sim``: build a simulated Trainium/Inferentia host under a directory and animate it.

    neuron-monitor-sim --shape trn2.48xlarge --runtimes 16 --root DIR [--seed N] [--lnc 1] [--driver VERSION|LAYOUT]
                       [--step 0.05] [--errors] [--duration S] [--options JSON]

Runs until SIGTERM, SIGINT or SIGHUP (or ``--duration``), then stops its worker processes and writes the final
ground truth. The tree stays in DIR (remove it yourself, or use `TemporarySimulator`). Exit codes: 0 done, 2 bad usage.
On stdout it says where the tree is, when it is ready, and the command that monitors it.

``--owner-pid PID`` (used by `TemporarySimulator`, hence ``neuron-monitor --simulate``): the simulator also stops
when process PID, its parent, is gone, even killed with SIGKILL (it checks its parent at least every
``WAKE_SECONDS``). ``--remove-on-exit DIR``: the simulator removes DIR (the temporary tree) whenever it stops, so
that a tree is not left behind when the owner cannot remove it (killed, or signalled with the whole process group,
as ``timeout`` and a terminal's Ctrl-C do). SIGTERM and SIGINT stop it within ``WAKE_SECONDS`` whatever ``--step``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_monitor.sim.layouts import REORGANIZED, driver_layout
from neuron_monitor.sim.shapes import SHAPES, get_shape
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, called_name, setup_logging
from neuron_monitor.util.early_signals import release

MARKER = "run/neuron-sim"


def default_runtimes(devices: int) -> int:
    return min(devices, 4)


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser("neuron-monitor-sim", description="Simulated Neuron host for neuron-monitor.")
    p.add_argument("--shape", help="instance type, e.g. trn1.32xlarge (see --list-shapes)")
    p.add_argument("--runtimes", type=int, default=None, help="Neuron applications to run (default: min(devices, 4))")
    p.add_argument("--root", help="directory to build the host tree in (created; must be empty or a previous tree)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (same seed, same workload)")
    p.add_argument("--lnc", type=int, choices=(1, 2), default=None, help="logical NeuronCore config (Trn2/Trn3)")
    p.add_argument(
        "--driver",
        default=None,
        help="driver to imitate: a version (default 2.30.2.0; 2.24.7.0 on inf1) or a reorganized layout "
        f"({', '.join(REORGANIZED)}; see --list-layouts)",
    )
    p.add_argument("--step", type=float, default=None, help="animation step in seconds (default 0.05)")
    p.add_argument(
        "--errors",
        action="store_true",
        help="applications fail now and then (background execution errors; default: none unless a fault asks)",
    )
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--options", default=None, help="JSON object of further options (see TemporarySimulator)")
    p.add_argument("--list-shapes", action="store_true", help="print the known shapes and exit")
    p.add_argument("--list-layouts", action="store_true", help="print the reorganized driver layouts and exit")
    p.add_argument("--owner-pid", type=int, default=None, help="stop when this process (the parent) is gone")
    p.add_argument("--remove-on-exit", default=None, metavar="DIR", help="remove DIR (the temporary tree) on exit")
    add_verbosity(p, default=2)
    return p


def _fail(msg: str) -> int:
    sys.stderr.write(f"neuron-monitor-sim: {msg}\n")
    return 2


def _prepare_root(root: Path) -> None:
    if root.exists():
        if not root.is_dir():
            raise ValueError(f"{root} exists and is not a directory")
        if any(root.iterdir()):
            if not (root / MARKER).is_dir():
                raise ValueError(f"{root} is not empty and is not a simulator tree; refusing to write into it")
            for child in root.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    root.mkdir(parents=True, exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    stop = {"flag": False}

    def _on_signal(signum: int, frame: Any) -> None:
        stop["flag"] = True

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # first: a stop while starting is kept
        signal.signal(signum, _on_signal)
    release()
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) and 2
    setup_logging(called_name("neuron-monitor-sim"), args.verbose)
    if args.list_layouts:
        for name, layout in REORGANIZED.items():
            print(f"{name:12} driver {layout.version}: {layout.moves}")
        return 0
    if args.list_shapes:
        for name, s in SHAPES.items():
            print(f"{name:16} devices={s.devices:2} cores/device={s.phys_cores} lnc={s.lnc} vcpus={s.vcpus}")
        return 0
    if not args.shape or not args.root:
        return _fail("--shape and --root are required")
    try:
        shape = get_shape(args.shape, args.lnc)
    except (KeyError, ValueError) as e:
        return _fail(str(e.args[0]) if e.args else str(e))
    options: dict[str, Any] = {}
    if args.options:
        try:
            options = json.loads(args.options)
        except ValueError as e:
            return _fail(f"--options: invalid JSON: {e}")
        if not isinstance(options, dict):
            return _fail("--options: expected a JSON object")
    if args.driver:
        try:
            driver_layout(args.driver, shape)
        except ValueError as e:
            return _fail(str(e))
        options["driver"] = args.driver
    if args.errors:
        options["errors"] = True
    if args.step is not None:
        options["step"] = args.step
    step = options.get("step", 1.0)
    if isinstance(step, bool) or not isinstance(step, int | float) or not (math.isfinite(step) and step > 0):
        return _fail(f"--step must be a positive number of seconds, not {step!r}")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration >= 0):
        return _fail(f"--duration must be a number of seconds >= 0, not {args.duration}")
    runtimes = args.runtimes if args.runtimes is not None else default_runtimes(shape.devices)
    if runtimes < 0:
        return _fail("--runtimes must be >= 0")
    root = Path(args.root).absolute()
    try:
        _prepare_root(root)
    except (ValueError, OSError) as e:
        return _fail(str(e))

    from neuron_monitor.sim.animator import Simulator

    end = None if args.duration is None else time.monotonic() + args.duration

    def _should_stop() -> bool:  # checked between steps and every WAKE_SECONDS of a step's sleep
        return stop["flag"] or owner_gone(args.owner_pid) or (end is not None and time.monotonic() >= end)

    sleep = signal_sleep()
    _say(f"building a simulated {shape.name} ({shape.devices} devices, {runtimes} runtimes) in {root}")
    try:
        sim = Simulator(root, shape, runtimes, args.seed, options)
    except (ValueError, OSError) as e:
        return _fail(f"cannot build the simulated host: {e}")
    (root / MARKER / "sim.pid").write_text(f"{os.getpid()}\n")
    _say(f"ready: root {root}")
    logging.getLogger("neuron_monitor.sim").info("started (pid %d): %s in %s", os.getpid(), shape.name, root)
    _say(f"monitor it: neuron-monitor --root {root}   (Ctrl-C stops the simulator; the tree stays)")
    try:
        sim.run(_should_stop, args.duration, sleep)
    finally:
        sim.shutdown()
        if args.remove_on_exit:  # the files the simulator made without listing them, then anything else there
            sim.builder.remove(os.path.abspath(args.remove_on_exit))
    return 0


def signal_sleep() -> Callable[[float], None]:
    """A sleep that ends as soon as a handled signal arrives: the signal writes a byte to a wakeup pipe
    (``signal.set_wakeup_fd``) that the sleep waits on, where ``time.sleep`` sleeps on after the handler ran. Main
    thread only. A stop then costs no part of a step's sleep (the owner waits for it while tearing down)."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)

    def sleep(seconds: float) -> None:
        if select.select([r], [], [], seconds)[0]:
            with contextlib.suppress(BlockingIOError):
                os.read(r, 512)

    return sleep


def owner_gone(owner_pid: int | None) -> bool:
    """True when an owner was named and is no longer this process's parent (it exited or was killed: the
    simulator was re-parented). The parent check cannot be fooled by a recycled pid."""
    return owner_pid is not None and os.getppid() != owner_pid


def _say(message: str) -> None:
    print(f"neuron-monitor-sim: {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
