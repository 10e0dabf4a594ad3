#!/usr/bin/env python3
"""Write the generated parts of the docs from the group specs (``make docs``); ``--check`` only says which files
differ (exit 1). The parts and their marks: neuron_monitor/schema/docgen.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_monitor.schema.docgen import REGION, rewrite

REPO = Path(__file__).resolve().parents[1]


def documents() -> list[Path]:
    """Every Markdown file of the repository that holds a generated part."""
    candidates = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    candidates += sorted((REPO / "neuron_monitor" / "groups").glob("*/README.md"))
    return [p for p in candidates if REGION.search(p.read_text())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is not current")
    args = parser.parse_args(argv)
    stale: list[str] = []
    for path in documents():
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            stale.append(str(path.relative_to(REPO)))
            if not args.check:
                path.write_text(new)
    for name in stale:
        print(f"{'not current' if args.check else 'written'}: {name}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
