"""Where the shipped host files are: ``neuron_monitor/_shipped/`` in a built package (a wheel, or a wheel built from
the sdist: setup.py copies them there), the source tree itself in a checkout or an editable install."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.install.shipped_list import SHIPPED, SKIPPED_PARTS, SKIPPED_SUFFIXES

PACKAGE = Path(__file__).resolve().parents[1]
SHIPPED_DIR = PACKAGE / "_shipped"


class NotShipped(LookupError):
    """A name that is not a shipped file."""


def shipped_root() -> Path:
    """The folder the shipped paths are relative to."""
    if SHIPPED_DIR.is_dir():
        return SHIPPED_DIR
    return PACKAGE.parent  # a source tree: the paths are the repository's own


def _wanted(rel: Path) -> bool:
    return rel.suffix not in SKIPPED_SUFFIXES and not set(rel.parts) & set(SKIPPED_PARTS)


def shipped_files(root: Path | None = None) -> list[str]:
    """Every shipped file's name (its path relative to the root, with "/"), sorted."""
    base = shipped_root() if root is None else root
    names: list[str] = []
    for entry in SHIPPED:
        path = base / entry
        if path.is_file():
            names.append(entry)
        elif path.is_dir():
            names += [
                p.relative_to(base).as_posix() for p in path.rglob("*") if p.is_file() and _wanted(p.relative_to(base))
            ]
    return sorted(names)


def select(prefixes: list[str]) -> list[str]:
    """The shipped files named by ``prefixes`` (a file's name, or a folder such as ``systemd`` or
    ``deploy/kubernetes``); all of them for none. NotShipped names a prefix that matches nothing."""
    names = shipped_files()
    if not prefixes:
        return names
    out: list[str] = []
    for prefix in prefixes:
        clean = prefix.strip("/")
        hits = [n for n in names if n == clean or n.startswith(clean + "/")]
        if not hits:
            raise NotShipped(prefix)
        out += [n for n in hits if n not in out]
    return out


def shipped_path(name: str) -> Path:
    """The file of one shipped name."""
    if name not in shipped_files():
        raise NotShipped(name)
    return shipped_root() / name
