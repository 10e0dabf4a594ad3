"""Writes dashboards/neuron-fleet.json, the Grafana fleet view: fleet -> node -> device, linking the node dashboard.

Run ``python3 dashboards/build_fleet_dashboard.py`` after changing a panel; a test checks the committed JSON matches,
and the fleet harness test runs every query against a central Prometheus fed through a Prometheus agent. The fleet
panels read the roll-ups of the ``neuron-monitor.fleet`` rule group (deploy/prometheus/neuron-monitor.rules.yml),
so the central Prometheus (or Mimir, AMP, Thanos ruler) must evaluate those rules; the variables filter on the
``node_group`` target label and the ``instance_type`` label. Node names link to the node dashboard
(``neuron-monitor.json``, uid ``neuron-monitor-prom``) with that node selected.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from panels import Layout, datasource_variable, panel, series, settings, stat, target, to_json, variable

OUT = Path(__file__).resolve().parent / "neuron-fleet.json"
NODE_DASHBOARD = "/d/neuron-monitor-prom/neuron-monitor"
G = 'node_group=~"$node_group"'
T = 'instance_type=~"$instance_type"'
GT = f"{G},{T}"
NODE_LINK = [
    {
        "title": "Open the node dashboard",
        "url": NODE_DASHBOARD + "?var-instance=${__data.fields.instance}&${__url_time_range}",
    }
]


def table(
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    node_link: bool = True,
    organize: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An instant table of one or more queries merged on their labels; the instance column links to the node."""
    overrides = []
    if node_link:
        overrides.append(
            {"matcher": {"id": "byName", "options": "instance"}, "properties": [{"id": "links", "value": NODE_LINK}]}
        )
    p = panel(
        "table",
        title,
        targets,
        description=description,
        options={"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": organize or {"excludeByName": {"Time": True, "job": True}}},
        ],
    )
    p["fieldConfig"]["overrides"] = overrides
    return p


def build() -> dict[str, Any]:
    lay = Layout()
    lay.row("Fleet")
    reporting = "Nodes whose exporter serves fresh reports (instance:neuron_node:info)."
    lay.add(
        stat("Nodes reporting", f"sum(instance_type:neuron_nodes:count{{{T}}}) or vector(0)", description=reporting),
        4,
        4,
    )
    lay.add(
        stat(
            "Exporters down",
            f"sum(node_group:neuron_exporters_down:count{{{G}}}) or vector(0)",
            description="Targets Prometheus cannot scrape (up == 0).",
            thresholds=[(1, "red")],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Unhealthy devices",
            f"sum(instance_type:neuron_devices_unhealthy:count{{{T}}}) or vector(0)",
            description="Neuron devices whose health verdict is unhealthy (the NeuronDeviceUnhealthy alert's).",
            thresholds=[(1, "red")],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Nodes not fully read",
            f"sum(instance_type:neuron_nodes_not_fully_read:count{{{T}}}) or vector(0)",
            description="Nodes where the daemon does not find a driver node some group reads and the host must "
            "expose (the NeuronMonitorSourceMissing alert's): run neuron-monitor --check there.",
            thresholds=[(1, "orange")],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Idle but allocated NeuronCores",
            f"sum(instance_type:neuroncore_idle_allocated:count{{{T}}}) or vector(0)",
            description="NeuronCores held by a runtime with models loaded that averaged under 1 % over 5 minutes.",
            thresholds=[(1, "orange")],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Allocated NeuronCores",
            f"sum(instance_type:neuroncore_allocated:count{{{T}}}) or vector(0)",
            description="NeuronCores held by a runtime that has models loaded.",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Firing alerts",
            f'count(ALERTS{{alertstate="firing",alertname=~"Neuron.*",{G}}}) or vector(0)',
            description="neuron-monitor alerts firing in the selected node groups.",
            thresholds=[(1, "red")],
        ),
        4,
        4,
    )
    lay.add(
        series(
            "NeuronCore busy by instance type",
            [(f"instance_type:neuroncore_busy:avg{{{T}}}", "{{instance_type}}")],
            "percentunit",
            "Mean over nodes of the share of each node's NeuronCores busy.",
            max_value=1,
        ),
        8,
        8,
    )
    lay.add(
        series(
            "NeuronCore busy by node group",
            [(f"node_group:neuroncore_busy:avg{{{G}}}", "{{node_group}}")],
            "percentunit",
            "Mean over the group's nodes.",
            max_value=1,
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Busy share: 10th, 50th, 90th percentile node",
            [(f"instance_type:neuroncore_busy:quantile{{{T}}}", "{{instance_type}} p{{quantile}}")],
            "percentunit",
            "The distribution of nodes' busy shares per instance type.",
            max_value=1,
        ),
        8,
        8,
    )
    lay.add(
        panel(
            "histogram",
            "Nodes by busy share (now)",
            [target(f"instance:neuroncore_busy:ratio{{{GT}}}", "{{instance}}", instant=True)],
            "percentunit",
            "How many nodes run at each busy share.",
            options={"bucketSize": 0.1, "combine": True, "legend": {"showLegend": False}},
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Idle but allocated NeuronCores by instance type",
            [
                (f"instance_type:neuroncore_idle_allocated:count{{{T}}}", "{{instance_type}} idle"),
                (f"instance_type:neuroncore_allocated:count{{{T}}}", "{{instance_type}} allocated"),
            ],
            "short",
            "Allocated NeuronCores, and those of them idle for 5 minutes.",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Nodes by node group",
            [
                (f"node_group:neuron_nodes:count{{{G}}}", "{{node_group}} reporting"),
                (f"node_group:neuron_exporters_down:count{{{G}}}", "{{node_group}} down"),
            ],
            "short",
            "Nodes serving reports, and exporters Prometheus cannot scrape.",
        ),
        8,
        8,
    )

    lay.row("Nodes (the instance links to the node dashboard)")
    lay.add(
        table(
            "Nodes needing attention",
            [
                target(f"instance:neuron_devices_unhealthy:count{{{GT}}}", ref="A", instant=True, table=True),
                target(f"instance:neuroncore_idle_allocated:count{{{GT}}} > 0", ref="B", instant=True, table=True),
                target(
                    f'count by (instance, node_group) (ALERTS{{alertstate="firing",alertname=~"Neuron.*",{G}}})',
                    ref="C",
                    instant=True,
                    table=True,
                ),
            ],
            "Nodes with unhealthy devices (A), idle but allocated NeuronCores (B) or firing alerts (C).",
        ),
        12,
        9,
    )
    lay.add(
        table(
            "Least busy nodes",
            [target(f"bottomk(15, instance:neuroncore_busy:ratio{{{GT}}})", instant=True, table=True)],
            "The 15 nodes whose NeuronCores are busy the least.",
        ),
        12,
        9,
    )
    lay.add(
        table(
            "Firing alerts",
            [target(f'ALERTS{{alertstate="firing",alertname=~"Neuron.*",{G}}}', instant=True, table=True)],
            "Every neuron-monitor alert firing in the selected node groups, with the node, device, runtime or "
            "NeuronCore it is about.",
            organize={
                "excludeByName": {"Time": True, "Value": True, "__name__": True, "alertstate": True, "job": True}
            },
        ),
        24,
        8,
    )

    lay.row("Devices")
    lay.add(
        table(
            "Unhealthy devices",
            [target(f'neuron_device_health_state{{{GT},state="unhealthy"}} == 1', instant=True, table=True)],
            "Neuron devices whose health verdict is unhealthy: a component the driver reports unhealthy, uncorrected "
            "ECC, hardware error events or a lost device (the node dashboard's health panel says which).",
        ),
        12,
        8,
    )
    lay.add(
        table(
            "Devices with uncorrected ECC errors in the last hour",
            [
                target(
                    f"sum by (instance, node_group, instance_type, neuron_device_index, event_type) (increase("
                    f'hardware_ecc_events_total{{{GT},event_type=~".*_uncorrected"}}[1h])) > 0',
                    instant=True,
                    table=True,
                )
            ],
            "Uncorrected HBM and SRAM ECC events (and repairable uncorrected ones) per device.",
        ),
        12,
        8,
    )

    return {
        "__inputs": [],
        "annotations": {"list": []},
        "description": "Fleet view of neuron-monitor: Trainium and Inferentia nodes by instance type and node group "
        "(docs/fleet.md). Needs the neuron-monitor.fleet recording rules.",
        "editable": True,
        "graphTooltip": 1,
        "links": [{"title": "Node dashboard", "type": "link", "url": NODE_DASHBOARD, "keepTime": True}],
        "panels": lay.panels,
        "refresh": "1m",
        "schemaVersion": 39,
        "tags": ["neuron", "trainium", "inferentia", "aws", "fleet"],
        "templating": {
            "list": [
                datasource_variable(),
                variable("node_group", "Node group", "label_values(instance:neuron_node:info, node_group)"),
                variable("instance_type", "Instance type", "label_values(instance:neuron_node:info, instance_type)"),
            ]
        },
        **settings("neuron-monitor fleet", "neuron-monitor-fleet", "now-6h"),
    }


def render() -> str:
    return to_json(build())


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
