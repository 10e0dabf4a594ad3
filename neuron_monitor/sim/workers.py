"""Real worker processes standing in for Neuron applications: one small ``/bin/sh`` loop per runtime.

Each worker has ``NEURON_PROCESS_TAG`` in its environment (unless the runtime is untagged), burns a little real
CPU (a counting loop) once a second, and exits on its own when its parent (the animator) is gone, so a killed simulator
never leaves orphans spinning.
"""

from __future__ import annotations

import os
import signal
import subprocess

_SCRIPT = 'p=$PPID; while kill -0 "$p" 2>/dev/null; do i=0; while [ $i -lt {n} ]; do i=$((i+1)); done; sleep 1; done'


def spawn_worker(tag: str | None, burn: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PROCESS_TAG"}
    if tag is not None:
        env["NEURON_PROCESS_TAG"] = tag
    return subprocess.Popen(
        ["/bin/sh", "-c", _SCRIPT.format(n=max(0, burn))],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 2.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
