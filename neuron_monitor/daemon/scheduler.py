"""Due-time loop: collect every (scope, group) unit on its own period, merge the newest data, hand one report out.

Timing: each unit is due on a fixed grid ``start + k * period`` (no drift: 1 s for an hour gives 3600 reports).
Everything due at a wake-up is collected in one go (on the loop while collections stay quick, in a worker
thread once one was slow: see `Collector.collect`), then one report is assembled and written (by the timer
callback itself when nothing has to be waited for: see `Scheduler`). While the writer is blocked (slow reader)
nothing is collected; grid slots that passed meanwhile are skipped, and the next collection's deltas cover the
whole gap, so no count is lost and at most one report is ever buffered. Each group's ``period`` is the
measured interval since its previous collection.

Runtime units share one application snapshot per wake-up. An application that vanishes stays in the report until
each of its groups has run once more (reporting its final counts, marked fresh), then leaves.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from neuron_monitor import __version__
from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.collection.apps import AppTracker
from neuron_monitor.daemon.collection.assembly import ReportAssembly
from neuron_monitor.daemon.collection.groups import GroupSet, error_text
from neuron_monitor.daemon.config import Plan
from neuron_monitor.groups.registry import DATA_BLOCK_GROUPS, load_collect_applications
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.app import AppSource

log = logging.getLogger("neuron_monitor.daemon.scheduler")

DUE_SLACK = 0.002  # units due within 2 ms of each other are collected together
LOOP_BUDGET = 0.05  # seconds of wall time a collection may take on the event loop (see Collector.collect)
LOOP_STRIKES = 3  # consecutive collections over LOOP_BUDGET that move collection off the loop
HARDWARE_INFO_REFRESH = 30.0
LATE_AFTER = 0.1  # a collection that starts this long after its due time (or LATE_FRACTION of its period, if
LATE_FRACTION = 0.25  # longer) is counted in neuron_monitor.late_collections
HEARTBEAT = ""  # the unit of a configuration without groups
DRIVER_VERSION_FILE = "sys/module/neuron/version"
DRIVER_VERSION_MAX_AGE = 1.0  # seconds the driver version read for neuron_monitor.driver_version is used again
WATCH_RIDE = 0.1  # seconds a fast watch may run early to share a wake-up with a report


def keep_due(unit: _Unit, old: _Unit | None, now: float) -> None:
    """Give a unit of a new plan its clock: a reload never delays a collection. A unit that stays with its period
    keeps its due time and grid; one whose period changed is due one new period after its last collection (now at
    the latest, if that is already past); a new unit starts its grid now."""
    if old is None or old.next_due <= 0.0:  # new, or the scheduler has not started yet (its _start sets the grid)
        unit.last, unit.next_due = now, now + unit.period
        return
    unit.last = old.last
    unit.next_due = old.next_due if old.period == unit.period else max(now, old.last + unit.period)


@dataclass
class _Unit:
    type_name: str
    period: float
    scope_index: int | None  # None: a system group
    next_due: float = 0.0
    last: float = 0.0
    early: bool = False  # its watch asked for a collection now (its due-time grid stays as it is)


@dataclass
class _Watch:
    """A system group's fast watch (a group with a ``watch_interval`` and a ``watch()`` returning True when a
    report should go out now): run every ``interval`` seconds, whatever the group's period."""

    unit: _Unit
    watch: Callable[[], bool]
    interval: float
    next_at: float = 0.0


class Collector:
    """Collects due units into one report: the groups (`GroupSet`), the applications (`AppTracker`) and the
    group objects (`ReportAssembly`), on a due-time grid of units kept here."""

    def __init__(
        self,
        root: RootFS,
        plan: Plan,
        apps: AppSource,
        hardware_info: Callable[[], dict[str, Any]],
        instance_info: Callable[[], dict[str, Any]],
        extras: dict[str, Callable[[], dict[str, Any]]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.app_source = apps
        self._hardware_info_fn = hardware_info
        self._instance_info_fn = instance_info
        self._extras: dict[str, Callable[[], dict[str, Any]]] = dict(extras or {})
        self.clock = clock
        self.plan = plan
        self.groups = GroupSet(root)
        self.apps = AppTracker(plan)
        self.listing_error = ""  # why the last listing of the Neuron applications failed as a whole ("" if it did not)
        self.assembly = ReportAssembly()
        self.units: list[_Unit] = []
        self.watches: list[_Watch] = []
        self.early_reports = 0  # reports a watch asked for
        self._hardware_info: dict[str, Any] | None = None
        self._hardware_info_at = -1e18
        self.on_loop = True  # collect on the event loop until LOOP_STRIKES collections in a row exceed LOOP_BUDGET
        self._collections = 0
        self._slow_streak = 0
        self.apply_plan(plan)

    # -- configuration -------------------------------------------------------------------------------
    def apply_plan(self, plan: Plan) -> None:
        """Install a (new) plan, keeping the state of groups that stay so that no baseline is lost."""
        now = self.clock()
        self.plan = plan
        self.groups.apply(plan)
        self.apps.apply(plan)
        self.assembly.apply(plan)
        old_units = {(u.scope_index, u.type_name): u for u in self.units}
        self.units = [_Unit(name, period, None) for name, period in plan.system_groups]
        for spec in plan.runtime_scopes:
            self.units += [_Unit(name, period, spec.index) for name, period in spec.groups]
        if not self.units:  # nothing configured: still report instance and hardware info
            self.units.append(_Unit(HEARTBEAT, plan.root_period, None))
        for u in self.units:
            keep_due(u, old_units.get((u.scope_index, u.type_name)), now)
        self.watches = []
        for u in self.units:
            group = self.groups.system.get(u.type_name) if u.scope_index is None else None
            interval = getattr(group, "watch_interval", None)
            if group is not None and isinstance(interval, float) and interval > 0 and hasattr(group, "watch"):
                self.watches.append(_Watch(u, group.watch, interval, now + interval))

    def add_extra(self, key: str, fn: Callable[[], dict[str, Any]]) -> None:
        """Add a top-level report object (e.g. ``neuron_k8s_info``), read when each report is assembled."""
        self._extras[key] = fn

    def prime(self) -> None:
        """Take every baseline now, when the scheduler starts: the system groups', and the runtime groups' for the
        applications already running, so that the first report covers its whole period for them too (the counts
        of an application seen for the first time later are counted from that sighting)."""
        self.groups.prime()
        if not self.plan.runtime_scopes:
            return
        self.root.begin_collection(self.clock())
        try:
            self.apps.update(self.app_source.snapshot(), self.app_source.version)
            for index, scope in self.apps.scopes.items():
                apps = list(scope.apps.values())
                for name, runtime_group in self.groups.runtime.get(index, {}).items() if apps else ():
                    try:
                        runtime_group.collect(apps, [])  # the first sighting: a baseline, its bodies are not reported
                    except Exception as e:
                        log.info("baseline of %s failed: %s", name, e)
        except Exception as e:  # listing applications failed: the first collection reports why
            log.info("baseline of the runtime groups failed: %s", e)
        finally:
            self.root.end_collection()

    def close(self) -> None:
        self.groups.close()

    # -- collection ----------------------------------------------------------------------------------
    def _collect_system(self, unit: _Unit) -> None:
        t = self.clock()
        period = round(t - unit.last, 9)
        unit.last = t
        try:
            body = self.groups.system[unit.type_name].collect()
        except Exception as e:
            log.debug("system group %s failed", unit.type_name, exc_info=True)
            obj = rpt.error_object(period, error_text(e), True)
        else:
            obj = rpt.group_object(body, period, body.get("error", ""), True)
        self.assembly.put_system(unit.type_name, obj)

    def _collect_runtime(
        self, unit: _Unit, index: int, snapshot_error: str, taken: dict[int, dict[str, Any]] | None = None
    ) -> None:
        """Collect one runtime unit; ``taken``: the bodies the compiled call already made for some of its present
        applications (groups/application.py), which the group's own ``collect`` then leaves to it."""
        t = self.clock()
        window = round(t - unit.last, 9)
        unit.last = t
        name = unit.type_name
        scope = self.apps.scopes[index]
        gone = self.apps.take_gone(index, name)
        if snapshot_error:
            results: dict[int, dict[str, Any]] = {pid: {"error": snapshot_error} for pid in scope.apps}
        else:
            apps = list(scope.apps.values())
            if taken:
                apps = [app for app in apps if app.pid not in taken]
            try:
                results = self.groups.runtime[index][name].collect(apps, gone)
            except Exception as e:
                log.debug("runtime group %s failed", name, exc_info=True)
                results = {pid: {"error": error_text(e)} for pid in scope.apps}
            else:
                if taken:
                    results = {**taken, **results}
        self.assembly.put_runtime_group(index, name, results, window, scope)
        self.apps.reported(index, name, gone)

    def due_units(self, now: float) -> list[_Unit]:
        """The units due at ``now``: on their grid, or asked for by their fast watch (run here when it is due)."""
        if not self.watches:  # the usual plan: only the grid (a unit is ``early`` only by its watch)
            limit = now + DUE_SLACK
            return [u for u in self.units if u.next_due <= limit]
        for w in self.watches:
            # a watch rides on a wake-up up to WATCH_RIDE before it is due (no wake-up of its own while reports
            # come that often), so two watches are never more than one interval apart
            if w.next_at - min(WATCH_RIDE, w.interval / 2) > now + DUE_SLACK:
                continue
            if now - w.unit.last < w.interval / 2 or w.unit.next_due <= now + DUE_SLACK:
                w.next_at = now + w.interval  # its group was just collected or is about to be: that reads the same
                continue
            w.next_at = now + w.interval
            try:
                if w.watch():
                    w.unit.early = True
            except Exception:
                log.debug("watch of %s failed", w.unit.type_name, exc_info=True)
        if any(u.early for u in self.units):
            self.early_reports += 1
            return [u for u in self.units if u.early or u.next_due <= now + DUE_SLACK]
        return [u for u in self.units if u.next_due <= now + DUE_SLACK]

    def next_due(self) -> float:
        units = self.units
        if not units:
            return self.clock() + 5.0
        due = units[0].next_due
        for u in units:
            if u.next_due < due:
                due = u.next_due
        for w in self.watches:
            if w.next_at < due:
                due = w.next_at
        return due

    def start_watches(self, start: float) -> None:
        for w in self.watches:
            w.next_at = start + w.interval

    async def collect(self, due: list[_Unit], executor: Executor) -> None:
        """Collect every due unit: the system groups, then the runtime groups (one shared application snapshot).

        Where: on the event loop itself, as long as collections take at most LOOP_BUDGET of wall time; after
        LOOP_STRIKES in a row that took longer, in a worker thread from then on (logged once). The first
        collection (opening devices and blocks) does not count, nor does one slow collection alone (the daemon
        preempted on a busy host). What the groups read cannot block for long: procfs files are generated in
        memory, data blocks are mapped memory, and the driver's sysfs ECC files and apps ioctl read device
        registers. Running them on the loop saves a thread hand-off and the cold start of a second thread per
        report (measured in docs/neuron-data.md); a device or driver that does make a read slow moves the work
        off the loop, so that signals and reloads are served while it waits. Either way it is one job, never two
        concurrent ones: the groups are Python code under one GIL, and two threads would only hand the GIL over
        at every file read."""
        if self.on_loop:
            self.collect_on_loop(due)
            return
        self.assembly.mark_stale({(u.scope_index, u.type_name) for u in due})
        work = self._work(due)
        if work is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._collect_all, *work)

    def collect_on_loop(self, due: list[_Unit]) -> None:
        """`collect` while collections run on the event loop (``on_loop``): here and now, counting slow ones."""
        self.assembly.mark_stale({(u.scope_index, u.type_name) for u in due})
        work = self._work(due)
        if work is None:
            return
        started = time.monotonic()
        self._collect_all(*work)
        took = time.monotonic() - started
        self._collections += 1
        if took <= LOOP_BUDGET or self._collections == 1:
            self._slow_streak = 0
            return
        self._slow_streak += 1
        if self._slow_streak >= LOOP_STRIKES:
            self.on_loop = False
            log.warning(
                "%d collections in a row took over %.0f ms on the event loop (the last %.0f ms): collecting in a "
                "worker thread from now on",
                self._slow_streak,
                LOOP_BUDGET * 1000,
                took * 1000,
            )

    def _work(self, due: list[_Unit]) -> tuple[list[_Unit], bool, list[_Unit]] | None:
        """What a collection of ``due`` does (system units, whether hardware info is refreshed, runtime units), or
        None when there is nothing to do."""
        system_due: list[_Unit] = []
        runtime_due: list[_Unit] = []
        for u in due:
            if u.scope_index is not None:
                runtime_due.append(u)
            elif u.type_name != HEARTBEAT:
                system_due.append(u)
        now = self.clock()
        refresh_hw = self._hardware_info is None or now - self._hardware_info_at >= HARDWARE_INFO_REFRESH
        if refresh_hw:
            self._hardware_info_at = now
        if not (system_due or runtime_due or refresh_hw):
            return None
        return system_due, refresh_hw, runtime_due

    def _collect_all(self, system_due: list[_Unit], refresh_hw: bool, runtime_due: list[_Unit]) -> None:
        self.root.begin_collection(self.clock())  # a directory is listed at most once (the device listing: less)
        try:
            for u in system_due:
                self._collect_system(u)
            if refresh_hw:
                self._refresh_hardware_info()
            if runtime_due:
                self._collect_runtime_units(runtime_due)
        finally:
            self.root.end_collection()

    def _collect_runtime_units(self, units: list[_Unit]) -> None:
        snapshot_error = ""
        try:
            snapshot = self.app_source.snapshot()
        except Exception as e:
            log.warning("listing Neuron applications failed: %s", e)
            snapshot_error = f"listing Neuron applications failed: {error_text(e)}"
        else:
            self.apps.update(snapshot, self.app_source.version)
        self.listing_error = snapshot_error  # named in neuron_monitor.error too: there may be no runtime to carry it
        taken = {} if snapshot_error else self._collected_together(units)
        for u in units:
            assert u.scope_index is not None
            self._collect_runtime(u, u.scope_index, snapshot_error, taken.get((u.scope_index, u.type_name)))

    def _collected_together(self, units: list[_Unit]) -> dict[tuple[int, str], dict[int, dict[str, Any]]]:
        """For each scope whose three data-block groups are all due now: the bodies one compiled call per
        application made for them (groups/application.py), by (scope, group name); each group's own ``collect``
        runs for the applications it declined."""
        due: dict[int, set[str]] = {}
        for u in units:
            if u.scope_index is not None:
                due.setdefault(u.scope_index, set()).add(u.type_name)
        out: dict[tuple[int, str], dict[int, dict[str, Any]]] = {}
        for index, names in due.items():
            if names.issuperset(DATA_BLOCK_GROUPS):
                apps = self.apps.scopes[index].apps.values()
                for name, bodies in load_collect_applications()(self.groups.runtime[index], apps).items():
                    out[(index, name)] = bodies
        return out

    def _refresh_hardware_info(self) -> None:
        try:
            self._hardware_info = self._hardware_info_fn()
        except Exception as e:
            self._hardware_info = rpt.empty_hardware_info(f"reading Neuron hardware info failed: {e}")

    # -- report --------------------------------------------------------------------------------------
    def build_report(self, wall: float | None = None) -> dict[str, Any]:
        """The report from the newest group objects. Its top-level objects are read as a collection reads (their
        readers' device listing is the one the collection used, kept up to a second: `RootFS.begin_collection`), so
        the report's ``neuron_monitor`` object lists no directory of its own per report."""
        self.root.begin_collection(self.clock())
        try:
            return self.assembly.build(
                self.apps.scopes,
                self._instance_info_fn(),
                self._hardware_info or rpt.empty_hardware_info("not read yet"),
                self._extras,
                wall,
            )
        finally:
            self.root.end_collection()

    def retire_gone(self) -> None:
        """After a report went out: forget vanished applications whose final counts have all been reported."""
        for index, pid in self.apps.retire():
            self.assembly.forget(index, pid)


_P = ParamSpec("_P")
_T = TypeVar("_T")


class DaemonThreadExecutor(Executor):
    """Runs jobs one at a time on a single daemon thread. Unlike ThreadPoolExecutor, whose threads the interpreter
    joins at exit without a deadline, a job stuck in a read cannot keep the process from ending on SIGTERM."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        if self._closed:
            raise RuntimeError("the executor was shut down")
        fut: Future[_T] = Future()
        self._jobs.put((fut, lambda: fn(*args, **kwargs)))
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        return fut

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fut, call = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(call())
            except BaseException as e:
                fut.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking jobs; ``wait`` waits at most 1 s for the running one (never without a deadline)."""
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        self._jobs.put(None)
        if wait and self._thread is not None:
            self._thread.join(timeout=1.0)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Scheduler:
    """Runs a Collector on its due-time grid and hands each report to ``write``.

    With ``write_now`` (a write that happens at once or not at all, `LineWriter.write_now`) and the default
    sleep, a report that nothing has to wait for is made by the timer callback that finds it due (`_tick_now`),
    so the `run` task stays asleep: no task switch and one event-loop turn per report. `run` wakes only for
    what must wait (a write the reader is not ready for, collections moved to the worker thread, a reload
    holding the lock), for a failure, and to stop; it then finishes the report through `_tick`, the twin that
    may await. Both make the same report from the same steps."""

    def __init__(
        self,
        collector: Collector,
        write: Callable[[bytes], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        write_now: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.collector = collector
        self.write = write
        self.write_now = write_now if sleep is None else None  # a sleep of the caller's own makes no report
        self.clock = clock
        self._sleep = sleep or self._sleep_until_due_or_stopped
        self._wakeup: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stop: asyncio.Event | None = None
        self._unsent: tuple[list[_Unit], bytes] | None = None  # a report made by the timer, its write still due
        self._failure: BaseException | None = None  # raised in a timer callback, re-raised by run
        self.executor = DaemonThreadExecutor("collect")  # one collection job at a time (see Collector.collect)
        self.reports = 0
        self.skipped_slots = 0
        self.late_collections = 0  # collections that started over LATE_AFTER behind their due time
        self.started = time.time()
        self._start_time = round(self.started, 3)  # the neuron_monitor object's start_time (rounded once)
        self.last_collection_seconds = 0.0
        self.lock = asyncio.Lock()  # held while collecting and writing; a reload waits for it
        self.after_report: Callable[[], None] | None = None  # housekeeping that rides on report wake-ups
        self._version: tuple[float, str] | None = None  # (read at, driver version)

    def self_report(self) -> dict[str, Any]:
        """The daemon's own health, as the additive top-level ``neuron_monitor`` object of each report."""
        return {
            "version": __version__,
            "start_time": self._start_time,
            "reports": self.reports,
            "skipped_collections": self.skipped_slots,
            "late_collections": self.late_collections,
            "collection_seconds": round(self.last_collection_seconds, 6),
            "driver_version": self._driver_version(),
            "sources": self._sources(),
            "error": "; ".join(e for e in (self.collector.app_source.problem, self.collector.listing_error) if e),
        }

    def _driver_version(self) -> str:
        """``sys/module/neuron/version`` as the driver prints it (stripped; "" when unreadable), read again at
        most once a second (`DRIVER_VERSION_MAX_AGE`): a driver reload shows within a second."""
        now = time.monotonic()
        kept = self._version
        if kept is not None and now - kept[0] < DRIVER_VERSION_MAX_AGE:
            return kept[1]
        try:
            raw = self.collector.groups.root.read_bytes(DRIVER_VERSION_FILE)[:64]
            version = raw.decode("utf-8", "replace").strip()
        except OSError:
            version = ""
        self._version = (now, version)
        return version

    def _sources(self) -> dict[str, Any]:
        """Each configured group's `SystemGroup.sources` (the groups that read the Neuron driver's nodes)."""
        out: dict[str, Any] = {}
        for name, group in self.collector.groups.system.items():
            got = group.sources()
            if got is not None:
                out[name] = got
        return out

    def _count_late(self, due: list[_Unit]) -> None:
        first, shortest = due[0].next_due, due[0].period
        for u in due:
            if u.next_due < first:
                first = u.next_due
            if u.period < shortest:
                shortest = u.period
        if self.clock() - first > max(LATE_AFTER, LATE_FRACTION * shortest):
            self.late_collections += 1

    def _reported(self) -> None:
        """A report went out."""
        self.collector.retire_gone()
        self.reports += 1
        if self.after_report is not None:
            self.after_report()

    async def _tick(self, due: list[_Unit]) -> None:
        c = self.collector
        self._count_late(due)
        t0 = time.monotonic()
        await c.collect(due, self.executor)
        self.last_collection_seconds = time.monotonic() - t0
        await self.write(rpt.encode(c.build_report()))
        self._reported()

    def _tick_now(self, due: list[_Unit]) -> bool:
        """`_tick` without awaiting anything, when collections run on the loop: True when the report went out.
        False when nothing was done (collections run in the worker thread), or when the report was made but its
        write must wait: it is then left in ``_unsent`` for `run`."""
        c = self.collector
        if not c.on_loop:
            return False
        self._count_late(due)
        t0 = time.monotonic()
        c.collect_on_loop(due)
        self.last_collection_seconds = time.monotonic() - t0
        line = rpt.encode(c.build_report())
        assert self.write_now is not None
        if not self.write_now(line):
            self._unsent = (due, line)
            return False
        self._reported()
        return True

    def _advance(self, due: list[_Unit]) -> None:
        now = self.clock()
        for u in due:
            if u.early:
                u.early = False
                if u.next_due > now + DUE_SLACK:  # collected ahead of its grid: its slot stays
                    continue
            u.next_due += u.period
            if u.next_due <= now:  # slots passed while we were blocked: skip them, the next delta covers them
                missed = int((now - u.next_due) // u.period) + 1
                u.next_due += missed * u.period
                self.skipped_slots += missed
                log.info("%s: skipped %d slot(s) (slow reader or slow collection)", u.type_name, missed)

    async def _start(self) -> None:
        """Take the baselines (off the loop) and start every unit's clock and due-time grid now."""
        await asyncio.get_running_loop().run_in_executor(self.executor, self.collector.prime)
        start = self.clock()
        for u in self.collector.units:
            u.last = start
            u.next_due = start + u.period
        self.collector.start_watches(start)

    async def _sleep_until_due_or_stopped(self, delay: float) -> None:
        """Sleep ``delay`` seconds, or less when stopped. One future and one timer: the cheapest wake-up asyncio
        offers (``asyncio.wait`` with a timeout costs more CPU per report: docs/neuron-data.md). With
        ``write_now`` the timer makes every report it can itself (`_on_due`) and ends the sleep only for one it
        cannot."""
        loop = asyncio.get_running_loop()
        self._wakeup = fut = loop.create_future()
        self._timer = loop.call_later(delay, self._on_due if self.write_now is not None else _wake, fut)
        try:
            await fut
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._wakeup = None

    def _on_due(self, fut: asyncio.Future[None]) -> None:
        """Timer callback: make the report that is due now (`_tick_now`) and set the timer for the next one; end
        the sleep (``fut``) for anything that must wait or be seen by `run`."""
        self._timer = None
        if fut.done():
            return
        try:
            if self.lock.locked() or self._unsent is not None or (self._stop is not None and self._stop.is_set()):
                _wake(fut)
                return
            due = self.collector.due_units(self.clock())
            if due:
                if not self._tick_now(due):
                    _wake(fut)
                    return
                self._advance(due)
            delay = self.collector.next_due() - self.clock()
            # the sleep's future knows its loop (asyncio.get_running_loop() asks the kernel for the pid each call)
            self._timer = fut.get_loop().call_later(max(0.0, delay), self._on_due, fut)
        except BaseException as e:  # ReaderGone, or a bug: run() raises it, as it would from _tick
            self._failure = e
            _wake(fut)

    def _stopped(self, _: object) -> None:
        if self._wakeup is not None:
            _wake(self._wakeup)

    async def run(self, stop: asyncio.Event) -> None:
        await self._start()
        self._stop = stop
        stopped = asyncio.get_running_loop().create_task(stop.wait())  # one waiter for the whole run, not one per sleep
        stopped.add_done_callback(self._stopped)
        try:
            while self._unsent is not None or not stop.is_set():  # a report made is written, stopping or not
                if self._unsent is None:
                    delay = self.collector.next_due() - self.clock()
                    if delay > 0:
                        await self._sleep(delay)
                    if self._failure is not None:
                        failure, self._failure = self._failure, None
                        raise failure
                    if self._unsent is None and stop.is_set():
                        break
                async with self.lock:
                    if self._unsent is not None:  # made by the timer; the reader was not ready for it
                        due, line = self._unsent
                        self._unsent = None
                        await self.write(line)
                        self._reported()
                        self._advance(due)
                        continue
                    due = self.collector.due_units(self.clock())
                    if not due:
                        continue
                    await self._tick(due)
                    self._advance(due)
        finally:
            stopped.cancel()

    async def run_once(self, window: float) -> None:
        """Prime, wait ``window`` seconds, collect every unit once, write one report."""
        await self._start()
        await asyncio.sleep(window)
        await self._tick(list(self.collector.units))

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.collector.close()
