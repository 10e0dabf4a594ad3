"""``neuron-monitor-install``: the host files the package carries, without a clone.

    neuron-monitor-install --list                          # every shipped file
    neuron-monitor-install --print systemd/neuron-monitor@.service
    neuron-monitor-install --extract DIR [NAME|FOLDER ...] # copies, keeping their paths (e.g. DIR/deploy/kubernetes/)
    neuron-monitor-install --systemd [--root /]            # units, env files and monitor.conf where systemd wants them

``--systemd`` writes the units (``*.service``, ``*.socket``, ``*.target``) to ``ROOT/etc/systemd/system/`` (replacing
older ones: local changes belong in drop-ins) and the env files and ``configs/monitor.conf`` to
``ROOT/etc/neuron-monitor/``, keeping an existing configuration file unless ``--force``. ``--extract`` never replaces
a file unless ``--force``. The env files are written readable by root only (0600): they are where the docs put
credentials (``AWS_*`` variables, an OTLP receiver's token), and systemd reads them as root; an existing one that
other users can read is kept, with a line saying so. One line per file says what was done. Exit codes: 0 done,
1 a file could not be written (the line names it), 2 bad usage or an unknown name.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from neuron_monitor.install.files import NotShipped, select, shipped_files, shipped_path
from neuron_monitor.util.cli_common import ArgumentParser

PROG = "neuron-monitor-install"
UNIT_SUFFIXES = (".service", ".socket", ".target")
UNITS_BIN = "/opt/neuron-monitor/bin"  # where the shipped units run the commands from


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(PROG, description="List, print or write out the host files this package ships.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="print the name of every shipped file")
    what.add_argument("--print", metavar="NAME", dest="print_name", help="write one shipped file to stdout")
    what.add_argument("--extract", metavar="DIR", help="copy shipped files below DIR, keeping their paths")
    what.add_argument(
        "--systemd", action="store_true", help="install the systemd units, env files and monitor.conf below --root"
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="with --extract: files or folders (e.g. deploy/kubernetes)")
    p.add_argument("--root", default="/", metavar="DIR", help="with --systemd: the system root to install below")
    p.add_argument("--force", action="store_true", help="replace existing files (configuration files included)")
    return p


def _mode(name: str, private: bool) -> int:
    if private:
        return 0o600
    return 0o755 if name.endswith(".sh") else 0o644


def _copy(name: str, target: Path, replace: bool, private: bool = False) -> str:
    """Copy one shipped file (``private``: readable by its owner only); the line that says what happened. OSError
    when it cannot be written."""
    if target.exists() and not replace:
        if private and target.stat().st_mode & 0o077:
            return f"kept {target} (exists); other users can read it and it may hold credentials: chmod 600 it"
        return f"kept {target} (exists; --force replaces it)"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.neuron-monitor-install")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _mode(name, private))  # never readable by others
    with os.fdopen(fd, "wb") as out:
        out.write(shipped_path(name).read_bytes())
    os.chmod(tmp, _mode(name, private))  # whatever the umask
    os.replace(tmp, target)
    return f"wrote {target}"


def _plan_systemd(root: Path) -> list[tuple[str, Path, bool]]:
    """(name, target, is a configuration file) for --systemd."""
    out: list[tuple[str, Path, bool]] = []
    for name in select(["systemd"]):
        base = Path(name).name
        if base.endswith(UNIT_SUFFIXES):
            out.append((name, root / "etc/systemd/system" / base, False))
        else:
            out.append((name, root / "etc/neuron-monitor" / base, True))
    out.append(("configs/monitor.conf", root / "etc/neuron-monitor/monitor.conf", True))
    return out


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"{PROG}: {message}\n")
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.names and not args.extract:
        return _fail("file names go with --extract", 2)
    if not shipped_files():
        return _fail("this install carries no host files (it was built without them, e.g. the container image)", 1)
    try:
        if args.list:
            sys.stdout.write("".join(f"{n}\n" for n in shipped_files()))
            return 0
        if args.print_name:
            sys.stdout.buffer.write(shipped_path(args.print_name).read_bytes())
            return 0
        if args.extract:
            plan = [(n, Path(args.extract) / n, False) for n in select(args.names)]
        else:
            plan = _plan_systemd(Path(args.root))
    except NotShipped as e:
        return _fail(f"{e.args[0]}: not a shipped file or folder (--list shows them)", 2)
    for name, target, is_config in plan:
        try:
            replace = args.force or (bool(args.systemd) and not is_config)
            line = _copy(name, target, replace, private=bool(args.systemd) and name.endswith(".env"))
        except OSError as e:
            return _fail(f"{target}: {e.strerror or e}", 1)
        print(line)
    if args.systemd:
        here = Path(sys.prefix) / "bin"
        if here != Path(UNITS_BIN):
            print(f"note: the units run the commands from {UNITS_BIN}; this package is installed in {here}")
        print("next: systemctl daemon-reload && systemctl enable --now neuron-monitor-prometheus.target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
