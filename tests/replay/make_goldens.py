"""Write the replay test's golden outputs: every input through every consumer of the checked-out code.

    .venv/bin/python -m tests.replay.make_goldens

Run it only on purpose (the goldens say what users see; a change to them is a change for users, to be named in
the commit that makes it).
"""

from __future__ import annotations

import gzip
import sys

from tests.replay.consumers import CONSUMERS
from tests.replay.inputs import GOLDEN, golden_path, inputs


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    for name, lines in inputs().items():
        for consumer, produce in CONSUMERS.items():
            data = produce(lines)
            golden_path(name, consumer).write_bytes(gzip.compress(data, 9, mtime=0))
            print(f"{name} {consumer}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
