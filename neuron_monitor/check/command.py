"""The `--check` command: one report collected, every source probed, the lines printed (text or ``--json``), and
the exit code (0: every source a configured group needs is there; 1: some are missing)."""

from __future__ import annotations

import argparse
import os

import orjson

import neuron_monitor
from neuron_monitor.check.lines import Line, as_json, exit_code, text
from neuron_monitor.check.run import check_lines, collect_one
from neuron_monitor.daemon.config import Plan
from neuron_monitor.host.rootfs import RootFS


def check(args: argparse.Namespace, plan: Plan, root: RootFS) -> tuple[list[Line], dict[str, object]]:
    """The lines and the one report they were made with."""
    report = collect_one(args, plan, root)
    return check_lines(args, plan, root, report), report


def render(lines: list[Line], args: argparse.Namespace, root: RootFS) -> bytes:
    if args.json:
        header = {"neuron_monitor_version": neuron_monitor.__version__, "root": str(root.root)}
        return orjson.dumps(as_json(lines, **header)) + b"\n"
    return text(lines).encode()


def main(args: argparse.Namespace, plan: Plan, root: RootFS) -> int:
    lines, _report = check(args, plan, root)
    data = render(lines, args, root)
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]
    return exit_code(lines)
