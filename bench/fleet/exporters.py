"""One process serving many exporters: each node is the real exporter (``ExporterState``, ``ExporterCollector``,
``ExporterApp`` and ``HTTPFront`` with its own event loop and loopback port), fed by one replay thread.

Why not one exporter process per node: a Python exporter process costs about 40 MB and half a second of CPU to
start, so 100 of them are 4 GB on a 2-vCPU machine shared with other work, and the OS would spend more on 100
sleeping interpreters than on the scrapes being measured. Here the per-node cost is what an exporter keeps per
node (its counters, its rendered report) plus an idle thread, and each scrape runs the same code path as in
``neuron-monitor-prometheus``: HTTP parsing, the negotiated format, gzip, the kept rendering. What is not the same:
the reports come from the replay thread instead of a stdin pipe (``StdinIngest``), and all nodes share one
interpreter, so a slow scrape of one node can delay another's (the figures are then worst cases).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

from bench.fleet.nodes import Node
from neuron_monitor.exporters.prometheus.app import ExporterApp
from neuron_monitor.exporters.prometheus.cli import runtime_collectors
from neuron_monitor.exporters.prometheus.collector import ExporterCollector
from neuron_monitor.exporters.prometheus.server import HTTPFront
from neuron_monitor.exporters.prometheus.snapshot import ShapeOptions
from neuron_monitor.exporters.prometheus.state import ExporterState


@dataclass
class NodeExporter:
    node: Node
    state: ExporterState
    collector: ExporterCollector
    front: HTTPFront
    down: bool = False

    @property
    def target(self) -> str:
        host, port = self.front.server_address
        return f"{host}:{port}"


class FleetExporters:
    """Starts one exporter per node; ``start_replay`` feeds each a report every ``interval`` seconds."""

    def __init__(self, nodes: list[Node], detail: str = "budget", interval: float = 5.0) -> None:
        self.interval = interval
        self.exporters: list[NodeExporter] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.time()
        self.applied = 0
        self.faults_since: float | None = None
        self.late = 0  # replay ticks that ran more than one interval behind
        try:
            for node in nodes:
                state = ExporterState(ShapeOptions(series_detail=detail))
                collector = ExporterCollector(state)
                app = ExporterApp(collector, runtime_collectors(), dashboard=None)
                front = HTTPFront(("127.0.0.1", 0), app, server_name="neuron-monitor-prometheus/fleet")
                app.front = front
                front.start()
                self.exporters.append(NodeExporter(node, state, collector, front))
        except BaseException:
            self.stop()
            raise

    def targets(self) -> dict[str, list[str]]:
        """Targets by node group label."""
        groups: dict[str, list[str]] = {}
        for e in self.exporters:
            groups.setdefault(e.node.node_group, []).append(e.target)
        return groups

    def by_target(self) -> dict[str, NodeExporter]:
        return {e.target: e for e in self.exporters}

    def feed_once(self) -> None:
        """One report to every node at once (so every exporter serves data before the first scrape)."""
        for e in self.exporters:
            self._feed(e, time.time())

    def _feed(self, e: NodeExporter, now: float) -> None:
        node = e.node
        if node.fault is not None and node.fault.kind == "exporter_down" and node.fault_due(now, self.faults_since):
            if not e.down:
                e.down = True
                e.front.stop()  # the listener closes: scrapes are refused, as when the process is gone
            return
        e.state.apply(node.report(now, self.started, self.faults_since))
        self.applied += 1

    def activate_faults(self) -> None:
        """Switch the nodes' faults on: each applies ``fault.at`` seconds from now."""
        self.faults_since = time.time()

    def start_replay(self) -> None:
        """Feed node i at offset i/N of each interval, so reports arrive evenly, until ``stop``."""
        for e in self.exporters:
            e.node.started = self.started
        self._thread = threading.Thread(target=self._replay, name="fleet-replay", daemon=True)
        self._thread.start()

    def _replay(self) -> None:
        n = len(self.exporters)
        step = self.interval / max(n, 1)
        due = time.monotonic()
        i = 0
        while not self._stop.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            if -wait > self.interval:
                self.late += 1
            self._feed(self.exporters[i], time.time())
            i = (i + 1) % n
            due += step

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for e in self.exporters:
            if not e.down:
                with contextlib.suppress(Exception):
                    e.front.stop(timeout=1.0)
