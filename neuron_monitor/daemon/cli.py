"""`neuron-monitor`: arguments, wiring, signals and exit codes.

Exit codes: 0 after SIGTERM/SIGINT or ``--once``; 1 when the stdout reader went away or the daemon failed;
2 for a bad configuration or bad arguments (one line on stderr, never a traceback).
Signals: SIGTERM/SIGINT finish the line being written and exit 0, within STOP_DEADLINE_SECONDS (util/stopping.py)
whatever a reload or a collection is doing (a watchdog thread ends the process if the orderly stop has not; no
thread is joined without a deadline). SIGHUP reloads the configuration (so does a change of the file: see
config_watch.py); a burst of them makes one reload (RELOAD_SETTLE_SECONDS), an unchanged file changes nothing, a bad new
configuration keeps the old one and says why in one line. A reload never delays a collection (see
scheduler.keep_due).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import neuron_monitor
from neuron_monitor.daemon.added_groups import with_health_groups
from neuron_monitor.daemon.config import Plan, load_plan, plan_warnings
from neuron_monitor.daemon.config_values import ConfigError
from neuron_monitor.daemon.config_watch import ConfigFileWatcher
from neuron_monitor.daemon.output import LineWriter, ReaderGone
from neuron_monitor.daemon.scheduler import Collector, Scheduler
from neuron_monitor.daemon.sdnotify import notify
from neuron_monitor.host.imds import DEFAULT_ENDPOINT, InstanceInfoSource
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.backend import open_backend
from neuron_monitor.neuron.ultraserver import InstanceInfoWithUltraServer, UltraServerSource
from neuron_monitor.sim.instance_info import SimulatedInstanceInfo
from neuron_monitor.util.cli_common import ArgumentParser, add_verbosity, positive_int, setup_logging
from neuron_monitor.util.early_signals import release
from neuron_monitor.util.fdlimit import raise_open_file_limit
from neuron_monitor.util.inputfile import kind_of
from neuron_monitor.util.sanitize import sanitize
from neuron_monitor.util.stopping import StopDeadline

if TYPE_CHECKING:
    from neuron_monitor.timeline.recording import Recorder

log = logging.getLogger("neuron_monitor")

STOP_GRACE_SECONDS = 1.2  # time allowed to finish the line being written after SIGTERM/SIGINT
RELOAD_SETTLE_SECONDS = 0.25  # SIGHUPs and file changes within this window make one reload


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 3600:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds in (0, 3600], got {text[:40]}")
    return value


def _watch_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not 0 <= value <= 60:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be 0 (off) or seconds up to 60, got {text[:40]}")
    return value


def add_sim_driver(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--sim-driver``: the driver the simulated host imitates (neuron-monitor and neuron-monitor-top)."""
    p.add_argument(
        "--sim-driver",
        default=None,
        metavar="VERSION|LAYOUT",
        help="driver the simulated host imitates: a version (default 2.30.2.0) or a reorganized layout "
        "(moved-cores, regrouped; docs/neuron-data.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        "neuron-monitor",
        description="Collect Neuron and host metrics and stream one JSON report per line to stdout.",
    )
    p.add_argument(
        "-c", "--config-file", metavar="FILE", help="neuron-monitor JSON configuration (default: every group, 5 s)"
    )
    add_verbosity(p, default=0)
    p.add_argument(
        "--exact-groups",
        action="store_true",
        help="collect exactly the configuration's groups (default: a configuration naming only AWS's groups also "
        "gets neuron_device_health, efa_counters and neuron_device_telemetry)",
    )
    p.add_argument("--once", action="store_true", help="write one report, then exit")
    p.add_argument(
        "--check",
        action="store_true",
        help="check every source the daemon reads on this host (or --root), one line each; exit 0 when every "
        "source a configured group needs is there, 1 when some are missing",
    )
    p.add_argument("--json", action="store_true", help="with --check: one JSON object instead of lines")
    p.add_argument(
        "--capture",
        metavar="FILE.tar.gz",
        help="write a bounded archive of what the daemon reads on this host (extracted, it is a --root that replays "
        "it); send it with a report of a problem",
    )
    p.add_argument("--redact", action="store_true", help="with --capture: replace runtime tags, model and pod names")
    p.add_argument("--root", default="/", metavar="DIR", help="read every host file below this directory (e.g. /host)")
    p.add_argument("--simulate", metavar="SHAPE", help="run against a temporary simulated host (e.g. trn1.32xlarge)")
    p.add_argument("--sim-runtimes", type=positive_int, default=None, metavar="N", help="simulated runtimes")
    add_sim_driver(p)
    p.add_argument("--seed", type=int, default=0, help="simulator seed")
    p.add_argument("--record", metavar="FILE", help="also append every report to this recording (rotated)")
    p.add_argument(
        "--record-max-bytes",
        type=positive_int,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="rotate the recording when it reaches this size (default 64 MiB)",
    )
    p.add_argument("--record-keep", type=positive_int, default=5, metavar="K", help="rotated files to keep")
    p.add_argument(
        "--imds-endpoint",
        default=os.environ.get("NEURON_MONITOR_IMDS_ENDPOINT", DEFAULT_ENDPOINT),
        metavar="URL",
        help="EC2 instance metadata endpoint (env NEURON_MONITOR_IMDS_ENDPOINT)",
    )
    p.add_argument(
        "--imds-timeout", type=_positive_float, default=1.0, metavar="S", help="seconds allowed for instance metadata"
    )
    p.add_argument("--no-imds", action="store_true", help="do not query instance metadata")
    p.add_argument(
        "--state-dir",
        default=os.environ.get("STATE_DIRECTORY", "").split(":")[0] or None,
        metavar="DIR",
        help="keep the device fault-event counts here across restarts (default: systemd's $STATE_DIRECTORY; "
        "without one they are counted from the daemon's start)",
    )
    p.add_argument(
        "--health-watch-interval",
        type=_watch_interval,
        default=None,
        metavar="S",
        help="seconds between two reads of the device health files, whatever the group's period (default 0.5; "
        "0: no watch, a verdict changes at the group's collections only)",
    )
    p.add_argument("--k8s-info", action="store_true", help="add neuron_k8s_info from the kubelet pod-resources API")
    p.add_argument(
        "--pod-resources-socket",
        default="/var/lib/kubelet/pod-resources/kubelet.sock",
        metavar="PATH",
        help="kubelet pod-resources socket",
    )
    from neuron_monitor.k8s.options import add_dra_arguments

    add_dra_arguments(p)
    return p


def load_daemon_plan(args: argparse.Namespace) -> tuple[Plan, str | None]:
    """The configuration file's plan as the daemon runs it (the health groups added to an AWS-only one unless
    --exact-groups: added_groups.py) and the line that says so."""
    plan, note = with_health_groups(load_plan(args.config_file), exact=args.exact_groups)
    return dataclasses.replace(plan, group_options=group_options(args)), note


def group_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The groups' constructor options the command line sets (the plan carries them to the groups it builds)."""
    health: dict[str, Any] = {}
    if args.state_dir:
        if os.path.exists(args.state_dir) and not os.path.isdir(args.state_dir):
            # was taken as an empty state at every start, silently: a restart counted the boot's events again
            given = any(a == "--state-dir" or a.startswith("--state-dir=") for a in sys.argv[1:])
            name = "--state-dir " if given else "STATE_DIRECTORY="
            raise ConfigError(f"{name}{args.state_dir}: not a directory (the fault-event state is kept in one)")
        health["state_dir"] = args.state_dir
    if args.health_watch_interval is not None:
        health["watch_interval"] = args.health_watch_interval
    return {"neuron_device_health": health} if health else {}


def _warn_about(plan: Plan, note: str | None = None) -> None:
    """Configuration warnings (and the note on added groups) go to stderr whatever --verbose says (like
    configuration errors)."""
    if note:
        sys.stderr.write(f"neuron-monitor: {sanitize(note)}\n")
    for warning in plan_warnings(plan):
        sys.stderr.write(f"neuron-monitor: warning: {sanitize(warning)}\n")
    sys.stderr.flush()


def _error_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:300]


def _ignore_stop_signals() -> None:
    """The daemon stopped: a repeated SIGTERM/SIGINT (a second Ctrl-C, `timeout` signalling the process group)
    must not cut the teardown short, which stops the simulator and removes its tree (bounded: see
    `TemporarySimulator.close`)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"neuron-monitor: {sanitize(message)}\n")
    sys.stderr.flush()
    return code


@contextlib.contextmanager
def host_root(args: argparse.Namespace) -> Iterator[str]:
    """The directory to read the host below: ``--root``, or a temporary simulated host for ``--simulate`` (not
    both: the simulated host would silently replace the root asked for)."""
    if args.simulate and os.path.normpath(args.root) != "/":
        raise ConfigError(f"--root {args.root} and --simulate {args.simulate}: give one of them")
    if not args.simulate:
        if not os.path.isdir(args.root):
            why = "not a directory" if os.path.exists(args.root) else "no such directory"
            raise ConfigError(f"--root {args.root}: {why}")
        yield args.root
        return
    try:
        from neuron_monitor.sim.temporary import TemporarySimulator, TreeDirError
    except ImportError as e:
        raise ConfigError(f"--simulate: the simulator is not available in this build ({e})") from None
    try:
        options = dict(getattr(args, "sim_options", None) or {})  # neuron-monitor-top's demo host (top/cli.py)
        if getattr(args, "sim_driver", None):
            options["driver"] = args.sim_driver
        sim = TemporarySimulator(args.simulate, runtimes=args.sim_runtimes, seed=args.seed, **options)
    except (KeyError, ValueError) as e:
        raise ConfigError(f"--simulate: {e.args[0] if e.args else e}") from None
    try:
        sim.start()  # on failure it leaves nothing behind
    except TreeDirError as e:
        raise ConfigError(f"--simulate: {e}") from None
    try:
        yield str(sim.root)
    finally:
        sim.close()


def instance_source(args: argparse.Namespace, root: RootFS) -> InstanceInfoSource | SimulatedInstanceInfo:
    """Where ``instance_info`` comes from for these options: the simulated shape under ``--simulate`` (never the
    network: off EC2 the metadata address hangs or says 403), else EC2 instance metadata unless disabled."""
    if args.simulate:
        return SimulatedInstanceInfo(args.simulate)
    imds_enabled = not args.no_imds and os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true"
    return InstanceInfoSource(args.imds_endpoint, args.imds_timeout, enabled=imds_enabled, root=root)


def open_recorder(args: argparse.Namespace) -> Recorder | None:
    """The ``--record`` writer (None without the option), its directory created like ``mkdir -p``; a path that
    cannot be written is a `ConfigError` (one line, exit 2) naming it."""
    if not args.record:
        return None
    from neuron_monitor.timeline.recording import Recorder

    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.record)), exist_ok=True)
        return Recorder(args.record, max_bytes=args.record_max_bytes, keep=args.record_keep)
    except OSError as e:
        raise ConfigError(f"--record {args.record}: {e.strerror or e}") from None


class Daemon:
    def __init__(self, args: argparse.Namespace, plan: Plan, root: RootFS) -> None:
        self.args = args
        self.backend = open_backend(root)
        self.instance = instance_source(args, root)
        extras: dict[str, Any] = {}
        self.k8s = None
        if args.k8s_info:
            from neuron_monitor.k8s.options import dra_directory
            from neuron_monitor.k8s.pod_info import PodInfoWatcher

            try:
                directory = dra_directory(args)
            except ValueError as e:
                raise ConfigError(str(e)) from None
            self.k8s = PodInfoWatcher(args.pod_resources_socket, dra_driver=args.dra_driver, directory=directory)
            hw = self.backend.hardware_info()  # device-plugin core IDs are logical cores, as this count is
            if hw.get("neuron_device_count"):
                self.k8s.set_cores_per_device(hw.get("neuroncore_per_device_count") or None)
                self.k8s.set_node_shape(hw.get("neuron_device_count"), hw.get("logical_neuroncore_config"))
            extras["neuron_k8s_info"] = self.k8s.snapshot
        self.writer = LineWriter(1, open_recorder(args))
        instance_info = InstanceInfoWithUltraServer(self.instance.get, UltraServerSource(root))
        self.collector = Collector(root, plan, self.backend.apps, self.backend.hardware_info, instance_info, extras)
        self.scheduler = Scheduler(self.collector, self.writer.write, write_now=self.writer.write_now)
        self.collector.add_extra("neuron_monitor", self._monitor_object(root))
        self.stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline = StopDeadline("neuron-monitor")
        self._reload_why: str | None = None
        self._reload_task: asyncio.Task[None] | None = None

    def _monitor_object(self, root: RootFS) -> Callable[[], dict[str, Any]]:
        """The report's ``neuron_monitor`` object: the scheduler's, each group's ``sources`` entry with the node
        families this host must expose (``required``: check/required.py), loaded once a group reports sources
        (a host-only configuration never loads it)."""
        required: list[Any] = []

        def monitor_object() -> dict[str, Any]:
            monitor = self.scheduler.self_report()
            if not monitor.get("sources"):
                return monitor
            if not required:
                from neuron_monitor.check.required import RequiredFamilies

                required.append(RequiredFamilies(root))
            annotated: dict[str, Any] = required[0].annotate(monitor)
            return annotated

        return monitor_object

    def request_reload(self, why: str) -> None:
        """Reload soon; requests arriving while one is pending or running make one more reload, not one each."""
        self._reload_why = why
        if self._reload_task is None or self._reload_task.done():
            self._reload_task = asyncio.get_running_loop().create_task(self._reloads())

    async def _reloads(self) -> None:
        while self._reload_why is not None:
            await asyncio.sleep(RELOAD_SETTLE_SECONDS)
            why, self._reload_why = self._reload_why, None
            await self.reload(why)

    async def reload(self, why: str) -> None:
        """Load the configuration file again (on the loop: a capped, non-blocking read of a regular file, so no
        thread is needed and none can hang) and apply it if it changed; errors keep the running plan."""
        try:
            plan, note = load_daemon_plan(self.args)
        except ConfigError as e:
            log.error("%s: keeping the previous configuration: %s", why, e)
            sys.stderr.flush()
            return
        except Exception as e:  # never a task exception nobody retrieves
            log.error("%s: keeping the previous configuration: %s", why, _error_line(e))
            return
        if plan.same_as(self.collector.plan):
            log.info("%s: configuration unchanged", why)
            return
        async with self.scheduler.lock:
            self.collector.apply_plan(plan)
        log.warning("%s: configuration reloaded from %s", why, plan.source)
        _warn_about(plan, note)

    def disarm(self) -> None:
        """The orderly stop finished: the watchdog is not needed (the simulator may take its time to clean up)."""
        self._deadline.cancel()

    def _on_stop_signal(self, signum: int, _frame: object) -> None:
        """SIGTERM/SIGINT (a plain signal handler: it runs even while the loop is busy): stop the loop's work,
        and arm the watchdog that ends the process at STOP_DEADLINE_SECONDS if the orderly stop stalls."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: it has stopped anyway
                loop.call_soon_threadsafe(self.stop.set)
        self._deadline.arm(signal.Signals(signum).name)

    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)
        loop.add_signal_handler(signal.SIGHUP, self.request_reload, "SIGHUP")
        if EARLY.stop is not None:  # asked to stop while starting
            self._on_stop_signal(signal.Signals[EARLY.stop], None)
        elif EARLY.reload:
            self.request_reload("SIGHUP")
        notify("READY=1")  # systemd (Type=notify): started; a `systemctl reload` may come now (sdnotify.py)
        plan = self.collector.plan
        groups = len(plan.system_groups) + sum(len(s.groups) for s in plan.runtime_scopes)
        log.info(
            "started (version %s, pid %d): root %s, configuration %s, %d metric groups, every %.3g s at the fastest",
            neuron_monitor.__version__, os.getpid(), self.collector.root.root, plan.source, groups,
            plan.smallest_period(),
        )  # fmt: skip
        self.instance.start()
        if self.k8s is not None:
            self.k8s.start()
        watcher = None
        if self.args.config_file:
            files = ConfigFileWatcher(self.args.config_file, self._file_changed)
            self.scheduler.after_report = files.poke
            watcher = loop.create_task(files.run())
        try:
            if self.args.once:
                window = min(self.collector.plan.smallest_period(), 1.0)
                await self.scheduler.run_once(window)
                return 0
            task = loop.create_task(self.scheduler.run(self.stop))
            await asyncio.wait([task, loop.create_task(self.stop.wait())], return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                try:  # let the line being written finish
                    await asyncio.wait_for(asyncio.shield(task), STOP_GRACE_SECONDS)
                except asyncio.TimeoutError:
                    log.error("stdout reader is stuck; exiting without finishing the last line")
                    task.cancel()
                    return 0
            task.result()
            return 0
        except ReaderGone:
            return _fail("stdout was closed by its reader (broken pipe); exiting", 1)
        finally:
            if watcher is not None:
                watcher.cancel()
            self.close()

    async def _file_changed(self) -> None:
        self.request_reload("configuration file changed")

    def close(self) -> None:
        if self._reload_task is not None:
            self._reload_task.cancel()
        self.scheduler.close()
        self.writer.close()
        self.instance.close()
        self.backend.close()
        if self.k8s is not None:
            self.k8s.close()


def _capture(args: argparse.Namespace, plan: Plan, root: RootFS) -> int:
    """``--capture``: exit 0 with a one-line summary on stderr; 2 when the file cannot be written."""
    from neuron_monitor.capture.archive import capture

    target = os.path.abspath(args.capture)
    if not os.path.isdir(os.path.dirname(target)):
        raise ConfigError(f"--capture {args.capture}: no such directory")
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(target).st_mode  # the archive is renamed over the path itself (a link there is replaced)
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            # a device node or FIFO was replaced by the archive: `--capture /dev/null` as root broke /dev/null
            raise ConfigError(f"--capture {args.capture}: is {kind_of(mode)}, not a regular file (left as it is)")
    try:
        info = capture(args, plan, root, target)
    except OSError as e:
        raise ConfigError(f"--capture {args.capture}: {e.strerror or e}") from None
    size = os.path.getsize(target)
    sys.stderr.write(
        f"neuron-monitor: wrote {args.capture} ({size} bytes, {info['members']} members, {info['data_blocks']} data "
        f"blocks{', redacted' if info['redacted'] else ''}; {info['left_out']} left out: see capture/skipped.txt)\n"
    )
    return 0


class _EarlySignals:
    """Signals that arrive before the daemon's loop runs (arguments, configuration, the simulator starting): a stop
    is kept and carried out as soon as the loop runs, a SIGHUP becomes a reload then. Installed first thing in
    `main`, before the console script's blocked signals are released (neuron_monitor/launch.py)."""

    def __init__(self) -> None:
        self.stop: str | None = None
        self.reload = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)
        release()

    def _on_stop(self, signum: int, _frame: object) -> None:
        self.stop = self.stop or signal.Signals(signum).name

    def _on_hup(self, _signum: int, _frame: object) -> None:
        self.reload = True


EARLY = _EarlySignals()


def main(argv: list[str] | None = None) -> int:
    EARLY.install()
    raise_open_file_limit()  # done by the console script already; again for python -m
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and not args.check:
        parser.error("--json goes with --check")
    if args.redact and not args.capture:
        parser.error("--redact goes with --capture")
    if args.capture and args.check:
        parser.error("--capture already holds --check's output: give one of them")
    setup_logging("neuron-monitor", args.verbose)
    try:
        plan, note = load_daemon_plan(args)
        _warn_about(plan, note)
        with host_root(args) as root:
            if args.check:
                from neuron_monitor.check.command import main as check_main

                return check_main(args, plan, RootFS(root))
            if args.capture:
                return _capture(args, plan, RootFS(root))
            daemon = Daemon(args, plan, RootFS(root))
            try:
                code = asyncio.run(daemon.run())
            finally:
                daemon.disarm()
                _ignore_stop_signals()
    except ConfigError as e:
        return _fail(str(e), 2)
    except KeyboardInterrupt:
        code = 0
    # stdout is written with os.write; keep the interpreter from flushing a dead pipe at exit
    with contextlib.suppress(OSError, ValueError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    return code


if __name__ == "__main__":
    sys.exit(main())
