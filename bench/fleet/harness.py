"""The fleet harness: recorded report streams replayed into many exporters in one process, scraped by a Prometheus
agent that remote-writes into a central Prometheus evaluating the rules (docs/fleet.md).

``plan_fleet(n)`` is the benchmark's fleet (``make fleet``), ``plan_ci()`` the test's; ``Fleet`` runs a plan.
``timed_rules`` makes the production rules' times fit a run of minutes or seconds: every ``for`` becomes ``hold``,
every range window ``window``, and the "errors in 5 minutes" factor (``* 300``) the window's seconds, so each
condition keeps its meaning; expressions, labels and annotations are otherwise unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fleet.exporters import FleetExporters
from bench.fleet.nodes import Churn, Fault, Node, alert_key, expected_alerts
from bench.fleet.prometheus import Agent, Central
from bench.fleet.recording import ShapeRun, record

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "neuron-monitor.rules.yml"
FLEET_DASHBOARD = REPO / "dashboards" / "neuron-fleet.json"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")
# Alerts about the pipeline's own timing: on a loaded machine a replay or scrape can fall behind for the few
# seconds of a test's hold, so they are only asserted silent on nodes without a fault when the run allows it.
TIMING_ALERTS = {"NeuronExporterDown", "NeuronExporterInputStale", "NeuronMonitorDaemonLagging"}


def seconds(text: str) -> int:
    return int(text[:-1]) * {"s": 1, "m": 60, "h": 3600}[text[-1]]


def timed_rules(text: str, hold: str, window: str) -> str:
    """The rules with ``for: hold`` and every range window ``[window]`` (see the module docstring)."""
    text = re.sub(r"for: \d+[smh]\b", f"for: {hold}", text)
    text = re.sub(r"\[\d+[smh]\]", f"[{window}]", text)
    return text.replace(" * 300 ", f" * {seconds(window)} ")


@dataclass
class FleetPlan:
    nodes: list[Node]

    @property
    def runs(self) -> list[ShapeRun]:
        return sorted({n.run for n in self.nodes}, key=lambda r: (r.shape, r.runtimes))


# (shape run, node group, share of the fleet): training on trn1/trn2/trn3, inference on inf2 and small trn1
FLEET_MIX: tuple[tuple[ShapeRun, str, float], ...] = (
    (ShapeRun("trn2.48xlarge", 16), "trn2-train", 0.35),
    (ShapeRun("trn1.32xlarge", 8), "trn1-train", 0.20),
    (ShapeRun("trn3.48xlarge", 8), "trn3-train", 0.10),
    (ShapeRun("inf2.48xlarge", 6), "inf2-serve", 0.15),
    (ShapeRun("inf2.xlarge", 1), "inf2-serve", 0.10),
    (ShapeRun("trn1.2xlarge", 2), "trn1-dev", 0.10),
)
FAULT_ROTATION = ("unhealthy_device", "hung_runtime", "ecc_uncorrected", "hardware_errors", "host_memory_pressure",
                  "exporter_down")  # fmt: skip


def plan_fleet(n: int = 100, faults: int = 6, churn_every: int = 10) -> FleetPlan:
    """``n`` nodes in ``FLEET_MIX`` proportions; ``faults`` of them (spread over the shapes) get one fault each,
    every ``churn_every``-th healthy node has a runtime that stops and starts again."""
    nodes: list[Node] = []
    for run, group, share in FLEET_MIX:
        for _ in range(max(1, round(n * share))):
            nodes.append(Node(len(nodes), run, group, ZONES[len(nodes) % len(ZONES)]))
    while len(nodes) < n:  # rounding: the rest are of the first shape
        run, group, _ = FLEET_MIX[0]
        nodes.append(Node(len(nodes), run, group, ZONES[len(nodes) % len(ZONES)]))
    nodes = nodes[:n]
    step = max(1, len(nodes) // max(faults, 1))
    for i in range(faults):
        node = nodes[(i * step + 3) % len(nodes)]
        kind = FAULT_ROTATION[i % len(FAULT_ROTATION)]
        node.fault = Fault(kind, at=0.0, device=min(3, _devices(node.run) - 1), runtime=node.run.runtimes - 1)
    for node in nodes[::churn_every]:
        if node.fault is None and node.run.runtimes > 1:
            node.churn = Churn(runtime=0, stop=20.0, start=40.0)
    return FleetPlan(nodes)


def plan_ci() -> FleetPlan:
    """Seven nodes, three shapes, two node groups: six with one fault each (one of them an exporter that goes
    away), one with a runtime that restarts. Shapes whose simulated hosts build in about a second (a 16-device
    trn1.32xlarge or trn2.48xlarge takes 5 to 20 s on a busy machine; the budget test covers the trn2.48xlarge)."""
    multi, trn1, inf2 = ShapeRun("inf2.24xlarge", 2), ShapeRun("trn1.2xlarge", 2), ShapeRun("inf2.xlarge", 1)
    nodes = [
        Node(0, multi, "train", ZONES[0], fault=Fault("unhealthy_device", device=3)),
        Node(1, trn1, "train", ZONES[1], fault=Fault("hung_runtime", runtime=1)),
        Node(2, inf2, "serve", ZONES[2], fault=Fault("hardware_errors", runtime=0)),
        Node(3, inf2, "serve", ZONES[3], fault=Fault("exporter_down")),
        Node(4, multi, "train", ZONES[0], fault=Fault("ecc_uncorrected", device=5)),
        Node(5, trn1, "serve", ZONES[1], churn=Churn(runtime=0, stop=0.0, start=6.0)),
        Node(6, inf2, "serve", ZONES[2], fault=Fault("host_memory_pressure")),
    ]
    return FleetPlan(nodes)


def _devices(run: ShapeRun) -> int:
    from neuron_monitor.sim.shapes import get_shape

    return get_shape(run.shape).devices


@dataclass
class Fleet:
    """Runs a plan: records its shapes, starts the exporters, the central Prometheus and the agent."""

    plan: FleetPlan
    detail: str = "budget"
    report_interval: float = 5.0
    scrape_interval: str = "15s"
    hold: str = "30s"
    window: str = "1m"
    reports_per_shape: int = 3
    recorded: dict[ShapeRun, list[bytes]] | None = None  # reuse a recording (e.g. for a second phase)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="neuron-fleet-")))
    exporters: FleetExporters | None = None
    central: Central | None = None
    agent: Agent | None = None

    def start(self) -> Fleet:
        """The central Prometheus starts while the shapes are recorded; the agent once every exporter serves."""
        try:
            rules = self.workdir / "neuron-monitor.rules.yml"
            rules.write_text(timed_rules(RULES.read_text(), self.hold, self.window))
            self.central = Central(self.workdir, [rules], evaluation_interval=self.scrape_interval)
            if self.recorded is None:
                self.recorded = record(self.plan.runs, self.reports_per_shape)
            for node in self.plan.nodes:
                node.reports, node.fault_applied = 0, False
                node.bind(self.recorded[node.run])
            self.exporters = FleetExporters(self.plan.nodes, self.detail, self.report_interval)
            self.exporters.feed_once()
            self.exporters.start_replay()
            self.central.ready()
            self.agent = Agent(self.workdir, self.exporters.targets(), self.central.write_url, self.scrape_interval)
            self.agent.ready()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def targets(self) -> dict[str, Node]:
        assert self.exporters is not None
        return {e.target: e.node for e in self.exporters.exporters}

    def expected_alerts(self) -> set[tuple[str, str, str]]:
        return {key for target, node in self.targets.items() for key in expected_alerts(node, target)}

    def wait(self, what: str, check: Any, timeout: float, every: float = 0.5) -> Any:
        """Poll ``check()`` until it returns a true value (returned) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            last = check()
            if last:
                return last
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r})")
            time.sleep(every)

    def firing(self) -> set[tuple[str, str, str]]:
        assert self.central is not None
        return {alert_key(a["labels"]) for a in self.central.alerts() if a["state"] == "firing"}

    def stop(self) -> None:
        for part in (self.agent, self.central):
            if part is not None:
                part.stop()
        if self.exporters is not None:
            self.exporters.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def dashboard_queries(path: Path = FLEET_DASHBOARD, rate_window: str = "1m") -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of a dashboard, with the variables set to "all"."""
    doc = json.loads(path.read_text())
    out = []
    for p in doc["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"].replace("$__rate_interval", rate_window)
            expr = re.sub(r'=~"\$\w+"', '=~".*"', expr)
            out.append((p["title"], expr))
    return out
