"""What the alerting end-to-end tests share: a simulated host piped through the daemon (1 s period) into the
exporter, a real Prometheus loading the shipped rules with test-sized times (`shortened_rules`), and a wait for
alerts to fire. Every wait has a generous deadline."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neuron_monitor.sim.temporary import TemporarySimulator
from tests.exporters.prometheus.prom_helpers import start_daemon
from tests.exporters.prometheus.prom_process import ExporterProcess
from tests.exporters.prometheus.prom_server import PrometheusServer

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml"
# Alerts about the monitoring pipeline's own timing (scrape failures, late or skipped reports): a loaded CI machine
# can legitimately raise them within shortened windows, so they are not asserted silent. Input staleness is
# asserted positively where a test stops the daemon.
LOAD_SENSITIVE = {
    "NeuronExporterDown",
    "NeuronExporterInputStale",
    "NeuronMonitorDaemonLagging",
    "NeuronMonitorCollectionsSkipped",
}


def shortened_rules(text: str) -> str:
    """The rules with test-sized times: ``for`` divided by 60 (at least 5 s), every range window 1 minute, and the
    "errors in 5 minutes" factor (``* 300``) scaled to that window (``* 60``). Nothing else changes."""

    def short_for(m: re.Match[str]) -> str:
        seconds = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
        return f"for: {max(seconds // 60, 5)}s"

    text = re.sub(r"for: (\d+)([smh])\b", short_for, text)
    text = re.sub(r"\[(\d+)[smh]\]", "[1m]", text)
    return text.replace(" * 300 ", " * 60 ")


class Pipeline:
    """A simulated host (``sim``, started here; ``prepare(root)`` then changes its tree before the daemon starts),
    its daemon with the given groups (1 s period) and the exporter reading it."""

    def __init__(
        self,
        workdir: Path,
        sim: TemporarySimulator,
        runtime_groups: Sequence[str],
        system_groups: Sequence[str],
        prepare: Callable[[Path], None] | None = None,
    ) -> None:
        self.sim = sim
        self.sim.start()
        if prepare is not None:
            prepare(self.sim.root)
        self.daemon = start_daemon(self.sim.root, workdir / "monitor.conf", runtime_groups, system_groups)
        assert self.daemon.stdout is not None
        self.exporter = ExporterProcess(stdin=self.daemon.stdout)
        self.daemon.stdout.close()  # the exporter holds the pipe now
        self.target = f"127.0.0.1:{self.exporter.port}"

    def stop(self) -> None:
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGCONT)  # a test may have stopped it (SIGSTOP: a hung daemon)
            self.daemon.terminate()
            self.daemon.wait(15)
        self.exporter.stop()
        self.sim.close()


@contextmanager
def alerting(
    workdir: Path,
    pipeline: Callable[[], Pipeline],
    ready: Sequence[tuple[str, Callable[[float], bool]]],
    timeout: float,
) -> Iterator[tuple[Pipeline, PrometheusServer]]:
    """The pipeline and a Prometheus scraping it with the shortened rules, once every ``ready`` query's value
    satisfies its predicate (each within ``timeout``); both stopped on exit."""
    rules = workdir / "neuron-monitor.rules.yml"
    rules.write_text(shortened_rules(RULES.read_text()))
    made = pipeline()
    prom = None
    try:
        prom = PrometheusServer(workdir, [made.target], job_name="neuron-monitor", rule_files=(rules,))
        for query, predicate in ready:
            prom.wait_value(query, predicate, timeout=timeout)
        yield made, prom
    finally:
        if prom is not None:
            prom.stop()
        made.stop()


def wait_firing(
    prom: PrometheusServer,
    wanted: set[tuple[str, str]],
    key: Callable[[dict[str, Any]], tuple[str, str]],
    timeout: float,
) -> dict[tuple[str, str], Any]:
    """Polls /api/v1/alerts until every wanted alert (by ``key``) has been seen firing (not necessarily all at once)."""
    seen: dict[tuple[str, str], Any] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for alert in prom.alerts():
            if alert["state"] == "firing" and key(alert) in wanted:
                seen.setdefault(key(alert), alert)
        if set(seen) >= wanted:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"never firing: {sorted(wanted - set(seen))}; active now: {[key(a) for a in prom.alerts()]}")
