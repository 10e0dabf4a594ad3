"""The simulator's ground truth: what really happened, so tests can hold the daemon to it.

File: ``<root>/run/neuron-sim/ground_truth.jsonl``, JSON lines, appended and flushed as things happen. Every line
has ``t`` (wall-clock epoch seconds) and ``event``:

- ``ready``: the tree is built. ``shape``, ``lnc``, ``devices``, ``phys_cores``, ``logical_cores``, ``driver``
  (the version written), ``layout`` (what ``--driver`` named: a layout, or the version), ``live_counters``
  (driver >= 2.30.2: NC counters survive their owner), ``seed``, ``step``.
- ``start``: a runtime attached. ``pid``, ``tag`` (its effective tag: NEURON_PROCESS_TAG, else the pid),
  ``index``, ``cores`` ({device: [physical cores]}), ``slots`` ({device: NDS slot}), ``exec_rate``,
  ``utilization``, ``latency_us`` [lo, hi] (device latency range; total latency is 1.05-1.15 x device).
- ``stop``: a runtime stopped executing and detached. ``pid``, ``tag``, ``reason``, ``totals`` (as below).
- ``hang``: a runtime stopped executing but stays attached (its cores sit at 0 % utilization). ``pid``, ``tag``.
- ``fault``: an injected fault was applied. ``kind``, ``count`` and ``pid``/``tag`` or ``device``.
- ``command``: a control command was applied. ``id`` and the command.
- ``totals``: cumulative counts since each runtime started, every ``truth_interval`` seconds and with every
  event: ``runtimes`` = {pid: {``tag``, ``counters`` ({completed, completed_with_err, completed_with_num_err,
  timed_out, incorrect_input, failed_to_queue, generic, numerical, transient, model, runtime, hardware}),
  ``busy_us`` ({"dev:core": µs}), ``macs`` ({"dev:core": n}), ``host_mem`` ({application_memory, constants,
  dma_buffers, tensors}), ``core_mem`` ({"dev:core": {constants, model_code, model_shared_scratchpad,
  runtime_memory, tensors}}), ``running`` (bool)}}; ``sysfs`` = {"dev:core:name": what the driver counted per
  core}; then each group part's keys (its ``totals``): ``ecc`` = {device: {mem_ecc_corrected, mem_ecc_uncorrected,
  sram_ecc_corrected, sram_ecc_uncorrected, ...}} (cumulative, as in sysfs; neuron_hw_counters), ``unhealthy`` =
  {device: [components]} (neuron_device_health), ``power`` = {device: the last roll-up line}
  (neuron_device_telemetry), ``efa`` = {"<adapter>/1": counters} (efa_counters).
- ``stopped``: the simulator shut down.

`GroundTruth(path)` reads the file (again on each call, incrementally) and answers questions such as
``total("job-00", "completed")``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

GROUND_TRUTH_FILE = "run/neuron-sim/ground_truth.jsonl"
_T = TypeVar("_T")


class GroundTruthWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the simulator

    def write(self, event: str, **fields: Any) -> None:
        self._f.write(json.dumps({"t": round(time.time(), 6), "event": event, **fields}, separators=(",", ":")))
        self._f.write("\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class GroundTruth:
    """Reader of a ground-truth file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lines: list[dict[str, Any]] = []
        self._offset = 0
        self._partial = b""

    def refresh(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self._lines
        self._offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        for line in complete:
            if line.strip():
                self._lines.append(json.loads(line))
        return self._lines

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.refresh() if event is None or e["event"] == event]

    def ready(self) -> dict[str, Any] | None:
        found = self.events("ready")
        return found[0] if found else None

    def runtimes(self) -> list[dict[str, Any]]:
        """The ``start`` events, in order."""
        return self.events("start")

    def runtime(self, tag: str) -> dict[str, Any]:
        for e in self.events("start")[::-1]:
            if e["tag"] == tag:
                return e
        raise KeyError(f"no runtime tagged {tag!r}")

    def latest_totals(self) -> dict[str, Any]:
        found = self.events("totals")
        return found[-1] if found else {"runtimes": {}, "ecc": {}}

    def runtime_totals(self, tag: str) -> list[dict[str, Any]]:
        """The newest totals of every runtime (pid) that carried ``tag``, stopped ones included."""
        by_pid: dict[str, dict[str, Any]] = {}
        for e in self.refresh():
            if e["event"] == "totals":
                for pid, rt in e["runtimes"].items():
                    if rt["tag"] == tag:
                        by_pid[pid] = rt
            elif e["event"] == "stop" and e["tag"] == tag:
                by_pid[str(e["pid"])] = e["totals"]
        return list(by_pid.values())

    def total(self, tag: str, counter: str) -> int:
        """Executions or errors of ``counter`` by every runtime tagged ``tag``, up to the newest line."""
        return sum(rt["counters"][counter] for rt in self.runtime_totals(tag))

    def ecc_total(self, device: int, counter: str) -> int:
        return int(self.latest_totals()["ecc"].get(str(device), {}).get(counter, 0))

    def wait_for(self, predicate: Callable[[GroundTruth], _T | None], timeout: float = 10.0) -> _T:
        """The predicate's first truthy answer, polled every 20 ms; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = predicate(self)
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"ground truth condition not met within {timeout} s")
            time.sleep(0.02)
