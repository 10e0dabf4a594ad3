"""The image entrypoint (deploy/image/entrypoint.sh) as a real process, for the end-to-end tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "deploy" / "image" / "entrypoint.sh"

ADDON_CONFIG = {  # the add-on's monitorConfig, at a 1 s period
    "period": "1s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}, {"type": "execution_stats"}],
        }
    ],
    "system_metrics": [{"period": "1s", "type": "neuron_hw_counters"}],
}


class Entrypoint:
    """``entrypoint.sh ARGS`` as a process; its stderr is collected by a thread, the port read from it."""

    def __init__(self, args: list[str], root: Path | None = None, **env: str) -> None:
        full_env = dict(os.environ, NEURON_MONITOR_PYTHON=sys.executable, NEURON_MONITOR_BIND="127.0.0.1", **env)
        if root is not None:
            full_env["NEURON_MONITOR_ROOT"] = str(root)
        full_env.setdefault("NEURON_MONITOR_DAEMON_ARGS", "--no-imds")
        self.proc = subprocess.Popen(
            [str(ENTRYPOINT), *args], env=full_env, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.decode(errors="replace"))

    def port(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.log):
                m = re.search(r"server at \S+ port (\d+)", line)
                if m:
                    return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"the exporter never said its port: {''.join(self.log)[-2000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self._reader.join(10)
        return code
