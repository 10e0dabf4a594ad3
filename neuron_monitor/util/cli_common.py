"""What the commands share: the name they were called by, one-line usage errors, defaults in ``--help``,
``--version`` (the installed package's version, from its metadata), and one logging option, ``--verbose 0..4``
(alias ``--log-level``, which also takes a level name).

Verbosity: 0 nothing, 1 errors, 2 warnings, 3 info, 4 debug; the names error, warning, info and debug map to
1..4 (and off/critical to 0). Logs go to stderr as ``<command>: <LEVEL>: <message>``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from neuron_monitor.util.sanitize import SafeFormatter, sanitize

VERBOSITY_LEVELS = {0: logging.CRITICAL + 1, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
VERBOSITY_NAMES = {"off": 0, "critical": 0, "error": 1, "warning": 2, "info": 3, "debug": 4}


def called_name(default: str) -> str:
    """The command's name as it was called: ``default`` or its ``.py`` alias (e.g. neuron-monitor-prometheus.py)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name in (default, default + ".py") else default


def verbosity(text: str) -> int:
    """``--verbose`` / ``--log-level``: 0..4 or a level name."""
    value = VERBOSITY_NAMES.get(text.strip().lower())
    if value is not None:
        return value
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number not in VERBOSITY_LEVELS:
        raise argparse.ArgumentTypeError(f"expected 0..4 or one of {', '.join(VERBOSITY_NAMES)}, got {text!r}")
    return number


class _HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless it names its default already or has none (None, False,
    or empty: an empty string or list would read "(default: )")."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            not action.option_strings
            or action.default is None
            or action.default is False
            or (isinstance(action.default, (str, list, tuple, dict)) and not action.default)
            or action.default == argparse.SUPPRESS
            or "default" in text.lower()
            or "%(default)" in text
        ):
            return text
        return text + " (default: %(default)s)"


def package_version() -> str:
    """The version of the installed distribution (its metadata, built from ``neuron_monitor.__version__``); the
    package's own ``__version__`` when it runs from a source tree that was never installed."""
    from importlib import metadata  # here, not at import: only --version pays for it

    import neuron_monitor

    try:
        return metadata.version("neuron-monitor")
    except metadata.PackageNotFoundError:
        return neuron_monitor.__version__


class _VersionAction(argparse.Action):
    """``--version``: print ``<command> <version>`` and exit 0 (the version is looked up only when asked)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(f"{parser.prog} {package_version()}\n")
        sys.stdout.flush()
        parser.exit(0)


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version`` for a parser that is not an `ArgumentParser` of this module."""
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser that names the command as it was called, reports a usage error in one line (exit 2) and
    answers ``--version``."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(prog=called_name(prog), **kwargs)
        add_version(self)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {sanitize(message)} (see --help)\n")  # it may echo an argument as given


def positive_int(text: str) -> int:
    """argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def bounded_int(most: int) -> Callable[[str], int]:
    """argparse type: a whole number from 1 to ``most`` (a size whose cost grows with it)."""

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"at most {most}, got {value}")
        return value

    return parse


def add_verbosity(parser: argparse.ArgumentParser, default: int, short: bool = False) -> None:
    """``--verbose`` / ``--log-level`` (and ``-v`` when ``short``), stored as ``verbose``."""
    names = ["--verbose", "--log-level"] + (["-v"] if short else [])
    parser.add_argument(
        *names,
        dest="verbose",
        type=verbosity,
        default=default,
        metavar="0..4",
        help="stderr detail: 0 nothing, 1 error, 2 warning, 3 info, 4 debug (a name works too; default: %(default)s)",
    )


def setup_logging(prog: str, verbose: int) -> None:
    """Send the package's log records at ``verbose`` and above to stderr, prefixed with the command's name."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(f"{prog}: %(levelname)s: %(message)s"))
    root = logging.getLogger("neuron_monitor")
    root.handlers[:] = [handler]
    root.setLevel(VERBOSITY_LEVELS[verbose])
    root.propagate = False


def warn_if_stdin_is_a_terminal(log: logging.Logger, source: str = "neuron-monitor") -> None:
    """One warning when the reports are to come from a terminal: an exporter run on its own to try it waits for
    lines nobody will type, silently at the default verbosity."""
    try:
        terminal = os.isatty(0)
    except OSError:
        return
    if terminal:
        log.warning("reading report lines from stdin, which is a terminal: pipe %s into this command", source)
