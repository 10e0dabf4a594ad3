"""`TemporarySimulator`: a simulated Neuron host in a temporary directory, for the demo and end-to-end tests.

with TemporarySimulator("trn1.32xlarge", runtimes=2, seed=1, exec_rate=100) as sim:
    run_daemon(root=sim.root)
    sim.inject("numerical_burst", tag="job-00", count=50)
    assert sim.truth.total("job-00", "numerical") >= 50
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import neuron_monitor
from neuron_monitor.sim.ground_truth import GROUND_TRUTH_FILE, GroundTruth
from neuron_monitor.sim.layouts import driver_layout
from neuron_monitor.sim.shapes import get_shape

log = logging.getLogger("neuron_monitor.sim")

STOP_SECONDS = 5.0
TMPFS = "/dev/shm"
TMPFS_MIN_FREE = 512 * 1024 * 1024  # a trn3 tree and its device files take well under this
TREE_DIR_ENV = "NEURON_MONITOR_SIM_DIR"


class TreeDirError(ValueError):
    """The temporary tree cannot be made where it is to go (``$NEURON_MONITOR_SIM_DIR`` missing, not a directory,
    not writable); ``str()`` is one line naming the place."""


def tree_parent() -> str | None:
    """Where temporary trees go: ``$NEURON_MONITOR_SIM_DIR`` when set, else /dev/shm when it is a writable tmpfs
    with room (a trn2.48xlarge tree is about 7,000 files and 4,400 directories: built on a disk, creating them
    takes several seconds), else None (the system's temporary directory, ``$TMPDIR``)."""
    chosen = os.environ.get(TREE_DIR_ENV)
    if chosen:
        return chosen
    try:
        st = os.statvfs(TMPFS)
    except OSError:
        return None
    if not os.access(TMPFS, os.W_OK | os.X_OK) or st.f_bavail * st.f_frsize < TMPFS_MIN_FREE:
        return None
    return TMPFS


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """``proc.wait(timeout)``, but woken the moment the process exits (a pidfd, Linux 5.3+), where
    `subprocess.Popen.wait` polls every 50 ms; raises `subprocess.TimeoutExpired` like it."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is already reaped
        return proc.wait(timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


class TemporarySimulator:
    """Builds a simulated host in a temporary root, animates it in a child process, removes it on exit.

    ``shape``: an instance type (``neuron_monitor.sim.shapes.SHAPES``); unknown names raise KeyError.
    ``runtimes``: Neuron applications to start (default ``min(devices, 4)``); ``seed``: workload seed.

    Options (all optional):

    - ``lnc`` (1 or 2): logical NeuronCore config on Trn2/Trn3 (ValueError if the shape cannot).
    - ``driver``: the driver imitated (ValueError if neither): a version, default "2.30.2.0" ("2.24.7.0" on inf1),
      in the layout of that version (before 2.30 the NDS slab is zeroed when its owner exits and the corrected-ECC
      files do not exist; before 2.8 stats live in ``metrics/``), or a reorganized layout by name, "moved-cores"
      (driver 2.31.0.0) or "regrouped" (2.32.0.0): the simulator's own inventions, where each node lives in
      docs/neuron-data.md ("Simulated driver layouts"; sim/layouts.py).
    - ``absent_nodes``: {device: [node family, ...]}: the tree is built without those nodes of that device
      ("ecc": the ECC counters, "health": health_status/, "power": power/utilization).
    - ``step`` (0.05 s): animation step. ``truth_interval`` (1.0 s): how often totals go to the ground truth.
    - ``exec_rate`` (executions/s per physical core), ``utilization`` (busy fraction 0..1), ``latency_us``
      ([lo, hi] device latency): the same for every runtime; default: drawn per runtime from the seed.
    - ``generic_error_rate``, ``numerical_error_rate``, ``timeout_rate``, ``failed_to_queue_rate``,
      ``hardware_error_rate``: per-execution probabilities (default 0: no execution fails unless asked).
    - ``errors`` (False): background execution errors, the rates above defaulting to 0.002, 0.0005, 0.0002,
      0.0005 and 0 (`workload.BACKGROUND_ERROR_RATES`).
    - ``tags``: list of NEURON_PROCESS_TAG values by runtime index (``None`` in the list: untagged, tag = pid);
      default ``job-00``, ``job-01``, ...
    - ``load_time`` (0.5 s): a runtime loads its models for this long after it starts before it executes.
    - ``slot_policy`` ("round_robin" or "lowest"): which free NDS slot a new runtime gets; "lowest" reuses a
      freed slot at once, as the driver does, so its carried-over counters show.
    - ``memory_interval`` (5 s; 0 = never): how often one runtime's tensor memory moves.
    - ``ecc_rate`` (0.02/s per device): random corrected-ECC events (driver >= 2.30 only); 0 disables.
    - ``worker_cpu`` (1000): size of each worker's counting loop, once a second (real CPU use).
    - ``faults``: scheduled commands, each a dict with ``at`` (seconds after start) and a command (below).

    Commands (`command` / `inject`, and ``faults``), by ``kind`` (each group's part documents its own in its
    ``sim.py``; `neuron_monitor.sim.animator.command_kinds` lists them all): ``numerical_burst``, ``hardware_error``,
    ``timeouts``, ``failed_to_queue_burst``, ``generic_errors`` (``tag``, ``count``) add errors to a runtime;
    ``ecc_uncorrected`` / ``ecc_corrected`` (``device``, ``count``, ``memory``: "mem" or "sram");
    ``stop_runtime`` (``tag``): stops executing and exits (detaches); ``hang_runtime`` / ``resume_runtime``
    (``tag``): stays attached with its cores at 0 %; ``pause`` / ``resume``: all runtimes stop/restart
    executing (counts and memory in use are then stable for exact comparisons); ``start_runtime`` (``like``: tag
    whose cores to reuse, default the last stopped runtime; ``new_tag``; ``untagged``); ``set_rate`` (``tag``,
    ``exec_rate``, ``utilization``); ``remove_device`` (``device``): the device disappears from sysfs and /dev;
    ``unhealthy`` / ``healthy`` (``device``, ``component``), ``ecc_repairable`` (``device``, ``count``),
    ``power_no_data`` / ``power_valid`` (``device``), ``hw_error_event`` (``device``, ``count``: the driver's
    health_status/hw_error_event grows) and ``reset_device`` (``device``: a device reset, the driver's ECC and
    hardware-error counts start again from zero and its unhealthy components clear); ``remove_nodes``
    (``device``, ``nodes``: a list of node families as for ``absent_nodes``): those files of the device vanish;
    the EFA commands of ``groups/efa_counters/sim.py``.

    Attributes: ``root`` (pathlib.Path), ``ground_truth_path``, ``truth`` (a `GroundTruth` reader).
    """

    def __init__(self, shape: str, runtimes: int | None = None, seed: int = 0, **options: Any) -> None:
        self.shape = get_shape(shape, options.get("lnc"))
        self.layout = driver_layout(options.get("driver"), self.shape)  # a bad --driver fails here, not in the child
        self.shape_name = shape
        self.runtimes = runtimes
        self.seed = seed
        self.options = options
        self._tmp: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._next_id = 0
        self.root = Path()
        self.ground_truth_path = Path()
        self.truth = GroundTruth(self.ground_truth_path)

    def __enter__(self) -> TemporarySimulator:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self, timeout: float = 120.0) -> None:
        """Start the simulator and wait until its tree is ready. The wait ends early when the simulator exits; the
        deadline only guards a wedged one: a trn3 tree on a starved, disk-backed machine takes tens of seconds.
        Once only: a second start would leave the first simulator running unowned until this process ends."""
        if self._tmp is not None:
            raise RuntimeError("the simulator is already started (the with-block starts it)")
        try:
            self._start(timeout)
        except BaseException:  # Ctrl-C while it builds included: no simulator or tree is left behind
            self.close()
            raise

    def _start(self, timeout: float) -> None:
        began = time.monotonic()
        parent = tree_parent()
        try:
            self._tmp = Path(tempfile.mkdtemp(prefix="neuron-sim-", dir=parent))
        except OSError as e:
            chosen = os.environ.get(TREE_DIR_ENV)
            where = f"{TREE_DIR_ENV}={chosen}" if chosen else (parent or tempfile.gettempdir())
            raise TreeDirError(f"cannot make the simulated host's tree in {where}: {e.strerror or e}") from None
        log.info("building a simulated %s in %s%s", self.shape_name, self._tmp, " (tmpfs)" if parent else "")
        self.root = self._tmp / "root"
        self.ground_truth_path = self.root / GROUND_TRUTH_FILE
        self.truth = GroundTruth(self.ground_truth_path)
        options = {k: v for k, v in self.options.items() if k != "lnc"}
        cmd = [sys.executable, "-m", "neuron_monitor.sim.cli", "--shape", self.shape_name, "--root", str(self.root)]
        cmd += ["--seed", str(self.seed), "--options", json.dumps(options)]
        # the simulator (and its workers) stop with this process, even after SIGKILL, and remove the temporary tree
        cmd += ["--owner-pid", str(os.getpid()), "--remove-on-exit", str(self._tmp)]
        if self.runtimes is not None:
            cmd += ["--runtimes", str(self.runtimes)]
        if self.options.get("lnc") is not None:
            cmd += ["--lnc", str(self.options["lnc"])]
        env = dict(os.environ)
        pkg_parent = str(Path(neuron_monitor.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._stderr: BinaryIO | None = open(self._tmp / "sim.stderr", "wb")  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._stderr)  # fmt: skip
        deadline = time.monotonic() + timeout
        while self.truth.ready() is None:
            if self._proc.poll() is not None:
                err = (self._tmp / "sim.stderr").read_text(errors="replace").strip()
                self.close()
                raise RuntimeError(f"simulator exited with {self._proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"simulator not ready within {timeout} s")
            time.sleep(0.02)
        log.info("simulated %s ready in %.1f s", self.shape_name, time.monotonic() - began)

    def command(self, kind: str, wait: bool = True, timeout: float = 10.0, **params: Any) -> dict[str, Any]:
        """Send a control command; with ``wait``, return its ``command`` ground-truth event once applied."""
        from neuron_monitor.sim.animator import CONTROL_FILE, command_kinds  # the animator runs in the child

        kinds = command_kinds()
        if kind not in kinds:
            raise ValueError(f"unknown command kind {kind!r} (known: {', '.join(kinds)})")
        self._next_id += 1
        cid = self._next_id
        line = json.dumps({"id": cid, "kind": kind, **params}) + "\n"
        with open(self.root / CONTROL_FILE, "a", encoding="utf-8") as f:
            f.write(line)
        if not wait:
            return {"id": cid}

        def applied(gt: GroundTruth) -> dict[str, Any] | None:
            for e in gt.events("command"):
                if e["id"] == cid:
                    return e
            return None

        ack = self.truth.wait_for(applied, timeout)
        if not ack.get("ok", False):
            raise RuntimeError(f"simulator rejected {kind}: {ack.get('error')}")
        return ack

    inject = command

    def stop_runtime(self, tag: str) -> dict[str, Any]:
        return self.command("stop_runtime", tag=tag)

    def hang_runtime(self, tag: str) -> dict[str, Any]:
        return self.command("hang_runtime", tag=tag)

    def pause(self) -> dict[str, Any]:
        return self.command("pause")

    def resume(self) -> dict[str, Any]:
        return self.command("resume")

    def pid_of(self, tag: str) -> int:
        return int(self.truth.runtime(tag)["pid"])

    def close(self) -> None:
        """Stop the simulator (SIGTERM; SIGKILL after STOP_SECONDS: its workers follow a vanished parent) and
        remove the tree."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                wait_exit(self._proc, STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        stderr = getattr(self, "_stderr", None)
        if stderr is not None:
            stderr.close()
            self._stderr = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
