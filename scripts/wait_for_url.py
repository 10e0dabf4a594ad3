"""Print one line once URL answers (the server is actually serving), for `make run`.

    python scripts/wait_for_url.py URL PID [MESSAGE]

Polls URL every 0.2 s; prints MESSAGE (default "serving URL") once it answers with any HTTP status, then exits 0.
Gives up silently (exit 1) when process PID (the `make run` shell) is gone or after 10 minutes.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    url, pid = argv[1], int(argv[2])
    message = argv[3] if len(argv) > 3 else f"serving {url}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return 1
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                r.read(1)
        except urllib.error.HTTPError:
            pass  # an answer all the same (e.g. 401 behind basic auth): serving
        except OSError:
            time.sleep(0.2)
            continue
        print(message, flush=True)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
