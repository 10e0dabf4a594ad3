"""A real ``neuron-monitor-taint`` process fed report lines by the test, against the stand-in API server."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from neuron_monitor.groups.neuron_device_health import body as K
from neuron_monitor.groups.neuron_device_health.spec import NAME as HEALTH_GROUP
from tests.k8s.apiserver_stub import StubApiServer

NODE = "ip-10-0-1-23.us-west-2.compute.internal"
OTHER_NODE = "ip-10-0-9-99.us-west-2.compute.internal"
DRIVER = "neuron.aws.com"
DEADLINE = 90.0


def health_report(states: dict[int, str], rule: str = "ecc_uncorrected") -> dict[str, Any]:
    """A report whose neuron_device_health body gives each device index its state."""
    devices = []
    for index, state in sorted(states.items()):
        reasons = [{"rule": rule, "severity": "unhealthy", "detail": "hbm", "message": "2 uncorrected"}]
        if state == "unknown":
            reasons = [{"rule": "signal_unreadable", "severity": "unknown", "detail": "x", "message": "cannot read"}]
        health = {"state": state, "since": 0.0, "reasons": reasons if state != "healthy" else []}
        devices.append({K.DEVICE_INDEX: index, K.HEALTH: health})
    return {"report_time": time.time(), "system_data": {HEALTH_GROUP: {K.NEURON_DEVICES: devices, "error": ""}}}


def slices(node: str = NODE, count: int = 16, pool: str | None = None) -> list[dict[str, Any]]:
    devices = [
        {
            "name": f"neurondevice{i}",
            "attributes": {"deviceId": {"int": i}, "resourceType": {"string": "neuron_device"}},
        }
        for i in range(count)
    ]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-neuron.aws.com-x1"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    ]


def api_server() -> StubApiServer:
    server = StubApiServer().start()
    server.slices = slices() + slices(OTHER_NODE)
    return server


def wait_for(what: str, cond: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class TaintProcess:
    def __init__(
        self,
        server: StubApiServer,
        tmp: Path,
        *args: str,
        node: str = NODE,
        stdin: Any = None,
        run: tuple[str, ...] = ("-m", "neuron_monitor.taint.cli"),
    ) -> None:
        self.err_path = tmp / f"taint-{time.monotonic_ns()}.err"
        self.metrics = tmp / "taint.prom"
        self._err = self.err_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *run,
                "--k8s-api",
                server.url,
                "--k8s-api-token-file",
                "",
                "--node-name",
                node,
                "--metrics-file",
                str(self.metrics),
                *args,
            ],
            stdin=subprocess.PIPE if stdin is None else stdin,
            stderr=self._err,
        )

    def send(self, report: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(report) + b"\n")
        self.proc.stdin.flush()

    def feed(self, states: dict[int, str], until: Callable[[], Any], what: str, rule: str = "ecc_uncorrected") -> Any:
        """Send a report with ``states`` every 0.2 s until ``until()`` holds."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            self.send(health_report(states, rule))
            got = until()
            if got:
                return got
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; stderr: {self.stderr()[-2000:]}")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def close(self) -> dict[str, Any]:
        """End of input; the exit summary."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(DEADLINE) == 0
        return self.summary()

    def summary(self) -> dict[str, Any]:
        for line in reversed(self.stderr().splitlines()):
            if " summary " in line:
                return dict(orjson.loads(line.split(" summary ", 1)[1]))
        raise AssertionError(f"no summary in: {self.stderr()[-2000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._err.close()
