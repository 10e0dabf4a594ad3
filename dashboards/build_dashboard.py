"""Writes dashboards/neuron-monitor.json, the Grafana dashboard for neuron-monitor-prometheus.

Run ``python3 dashboards/build_dashboard.py`` after changing a panel; a test checks the committed JSON matches.
Every query filters on the ``$instance`` variable (the Prometheus target label, present whatever the exporter's
instance-label mode) and runtime panels on ``$runtime``; the data source is the ``$datasource`` variable.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from panels import DS, Layout, datasource_variable, panel, series, settings, stat, target, to_json, variable

OUT = Path(__file__).resolve().parent / "neuron-monitor.json"
I = 'instance=~"$instance"'  # noqa: E741 - short on purpose, used in every query
R = f'{I},runtime_tag=~"$runtime"'
RATE = "$__rate_interval"


# neuron-monitor's alerts (deploy/prometheus/neuron-monitor.rules.yml) as Prometheus records them in ALERTS.
FIRING = f'ALERTS{{alertstate="firing",alertname=~"Neuron.*",{I}}}'


def build() -> dict[str, Any]:
    lay = Layout()
    lay.row("Firing alerts")
    lay.add(
        panel(
            "table",
            "Firing alerts",
            [target(FIRING, instant=True, table=True)],
            description="neuron-monitor alerts firing now (deploy/prometheus/neuron-monitor.rules.yml; runbooks in "
            "docs/alerts.md). Empty when all is well, or when Prometheus does not load the rules.",
            transformations=[
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "Value": True, "__name__": True, "alertstate": True},
                        "indexByName": {"alertname": 0, "severity": 1, "instance": 2},
                    },
                }
            ],
            options={"showHeader": True, "footer": {"show": False}},
            defaults={"noValue": "No alert firing"},
        ),
        24,
        5,
    )
    lay.row("Fleet overview")
    lay.add(
        stat(
            "Nodes reporting",
            f"count(neuron_exporter_up{{{I}}} == 1)",
            description="Exporters with a fresh report and open input",
        ),
        3,
        4,
    )
    lay.add(
        stat(
            "Nodes not reporting",
            f"count(neuron_exporter_up{{{I}}} == 0) or vector(0)",
            thresholds=[(1, "red")],
            description="Exporters whose daemon stopped or went stale",
        ),
        3,
        4,
    )
    lay.add(stat("Neuron runtimes", f"sum(neuron_exporter_runtimes{{{I}}})"), 3, 4)
    lay.add(stat("NeuronCores in use", f"count(neuroncore_utilization_ratio{{{I}}} > 0)"), 3, 4)
    lay.add(
        panel(
            "gauge",
            "NeuronCore utilization",
            [target(f"avg(neuroncore_utilization_ratio{{{I}}})", instant=True)],
            "percentunit",
            defaults={"min": 0, "max": 1},
        ),
        3,
        4,
    )
    lay.add(
        stat("Executions / s", f'sum(rate(execution_status_total{{{I},status_type="completed"}}[{RATE}]))', "ops"), 3, 4
    )
    lay.add(
        stat(
            "Execution errors / s",
            f"sum(rate(execution_errors_total{{{I}}}[{RATE}]))",
            "ops",
            thresholds=[(0.001, "orange"), (1, "red")],
        ),
        3,
        4,
    )
    lay.add(
        stat(
            "Uncorrected ECC events",
            f'sum(hardware_ecc_events_total{{{I},event_type=~".*_uncorrected"}})',
            thresholds=[(1, "red")],
        ),
        3,
        4,
    )
    lay.add(
        panel(
            "table",
            "Nodes",
            [target(f"instance_info{{{I}}}", instant=True, table=True)],
            transformations=[
                {
                    "id": "organize",
                    "options": {"excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True}},
                }
            ],
        ),
        12,
        7,
    )
    lay.add(
        panel(
            "bargauge",
            "NeuronCore utilization by node",
            [target(f"avg by (instance) (neuroncore_utilization_ratio{{{I}}})", "{{instance}}", instant=True)],
            "percentunit",
            defaults={"min": 0, "max": 1},
            options={"orientation": "horizontal", "displayMode": "gradient"},
        ),
        6,
        7,
    )
    lay.add(
        panel(
            "bargauge",
            "Host vCPU utilization by node",
            [target(f"sum by (instance) (system_vcpu_usage_ratio{{{I}}})", "{{instance}}", instant=True)],
            "percentunit",
            defaults={"min": 0, "max": 1},
            options={"orientation": "horizontal", "displayMode": "gradient"},
        ),
        6,
        7,
    )

    lay.row("NeuronCores")
    lay.add(
        series(
            "NeuronCore utilization per core",
            [(f"avg by (instance, neuroncore) (neuroncore_utilization_ratio{{{R}}})", "{{instance}} nc{{neuroncore}}")],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        series(
            "NeuronCore utilization per device",
            [
                (
                    f"avg by (instance, neuron_device_index) (neuroncore_utilization_ratio{{{R}}})",
                    "{{instance}} nd{{neuron_device_index}}",
                )
            ],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Physical NeuronCore utilization (Trn2 logical cores)",
            [
                (
                    f"avg by (instance, neuroncore, physical_neuroncore) "
                    f"(neuroncore_physical_utilization_ratio{{{R}}})",
                    "{{instance}} nc{{neuroncore}} {{physical_neuroncore}}",
                )
            ],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Floating point operations per device",
            [
                (
                    f"sum by (instance, neuron_device_index) "
                    f"(rate(neuroncore_floating_point_operations_total{{{R}}}[{RATE}]))",
                    "{{instance}} nd{{neuron_device_index}}",
                )
            ],
            "flops",
        ),
        12,
        8,
    )

    lay.row("Device memory")
    kinds = ["constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors"]
    lay.add(
        series(
            "Device memory by category",
            [(f"sum(neuroncore_memory_usage_{k}{{{R}}})", k) for k in kinds],
            "bytes",
            stacked=True,
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Device memory per device",
            [
                (
                    f'sum by (instance, neuron_device_index) ({{__name__=~"neuroncore_memory_usage_.+",{R}}})',
                    "{{instance}} nd{{neuron_device_index}}",
                )
            ],
            "bytes",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Runtime memory",
            [
                (
                    f"sum by (runtime_tag, memory_location) (neuron_runtime_memory_used_bytes{{{R}}})",
                    "{{runtime_tag}} {{memory_location}}",
                )
            ],
            "bytes",
        ),
        8,
        8,
    )

    lay.row("Executions")
    lay.add(
        series(
            "Executions by status",
            [(f"sum by (status_type) (rate(execution_status_total{{{R}}}[{RATE}]))", "{{status_type}}")],
            "ops",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Execution errors by type",
            [(f"sum by (error_type) (rate(execution_errors_total{{{R}}}[{RATE}]))", "{{error_type}}")],
            "ops",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Failed execution ratio",
            [
                (
                    f'sum(rate(execution_status_total{{{R},status_type!="completed"}}[{RATE}])) / '
                    f"sum(rate(execution_status_total{{{R}}}[{RATE}]))",
                    "failed / all",
                )
            ],
            "percentunit",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Execution latency (runtime) p50 / p99",
            [
                (
                    f'max by (runtime_tag, percentile) (execution_latency_seconds{{{R},percentile=~"p50|p99"}})',
                    "{{runtime_tag}} {{percentile}}",
                )
            ],
            "s",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Execution latency (device) p50 / p99",
            [
                (
                    f'max by (runtime_tag, percentile) (execution_device_latency_seconds{{{R},percentile=~"p50|p99"}})',
                    "{{runtime_tag}} {{percentile}}",
                )
            ],
            "s",
        ),
        12,
        8,
    )

    lay.row("Hardware ECC")
    lay.add(
        series(
            "ECC events per device",
            [
                (
                    f"sum by (instance, neuron_device_index, event_type) "
                    f"(rate(hardware_ecc_events_total{{{I}}}[{RATE}]))",
                    "{{instance}} nd{{neuron_device_index}} {{event_type}}",
                )
            ],
            "ops",
        ),
        16,
        8,
    )
    lay.add(
        panel(
            "table",
            "ECC events (totals)",
            [
                target(
                    f"sum by (instance, neuron_device_index, event_type) (hardware_ecc_events_total{{{I}}})",
                    instant=True,
                    table=True,
                )
            ],
        ),
        8,
        8,
    )

    lay.row("Device health")
    lay.add(
        stat(
            "Nodes not healthy",
            f'count(neuron_node_health_state{{{I},state!="healthy"}} == 1) or vector(0)',
            description="Nodes whose Neuron devices are not all healthy (the neuron_device_health verdict: "
            "unhealthy if any device is, unknown if any cannot be told). docs/health.md has the rules.",
            thresholds=[(1, "red")],
        ),
        3,
        8,
    )
    lay.add(
        panel(
            "table",
            "Devices not healthy, and why",
            [
                target(
                    f'max by (instance, neuron_device_index, state) (neuron_device_health_state{{{I},state!="healthy"}}'
                    " == 1)",
                    "",
                    "A",
                    True,
                    True,
                ),
                target(
                    "max by (instance, neuron_device_index, rule, detail, severity)"
                    f" (neuron_device_health_reason{{{I}}})",
                    "",
                    "B",
                    True,
                    True,
                ),
            ],
            description="A: each device whose verdict is unhealthy or unknown. B: the findings behind every verdict "
            "(rule, detail, severity; a repair_pending warning keeps a device healthy). The NeuronDeviceUnhealthy "
            "alert fires on A's unhealthy rows.",
        ),
        6,
        8,
    )
    lay.add(
        series(
            "Device fault events",
            [
                (
                    # a kind's series is served from its first event on (the series budget), so its first
                    # appearance is counted too: increase() alone would miss it
                    f"sum by (instance, neuron_device_index, kind) "
                    f"(increase(neuron_device_fault_events_total{{{I}}}[$__rate_interval])) > 0 "
                    f"or sum by (instance, neuron_device_index, kind) "
                    f"(neuron_device_fault_events_total{{{I}}} "
                    f"unless neuron_device_fault_events_total{{{I}}} offset $__rate_interval)",
                    "{{instance}} nd{{neuron_device_index}} {{kind}}",
                )
            ],
            "short",
            "Fault events per device and kind (uncorrected and repairable ECC, hardware error events, components "
            "turning unhealthy, devices lost), each counted once by the daemon. A kind is served from its first "
            "event on, so a series that appears counts as its events.",
        ),
        3,
        8,
    )
    lay.add(
        series(
            "Device power (avg of the last minute)",
            [
                (
                    f'max by (instance, neuron_device_index) (neuron_device_power_utilization_ratio{{{I},stat="avg"}})',
                    "{{instance}} nd{{neuron_device_index}}",
                )
            ],
            "percentunit",
            "The driver's one-minute power roll-up as a share of the device's maximum; a roll-up without data "
            "(NO_DATA/INVALID) leaves a gap, not a zero.",
            max_value=1,
        ),
        6,
        8,
    )
    lay.add(
        series(
            "Device memory by category (driver)",
            [
                (
                    f"sum by (category) (neuron_device_memory_used_bytes{{{I}}})",
                    "{{category}}",
                )
            ],
            "bytes",
            "Device memory of every process and the driver, by the driver's category.",
            stacked=True,
        ),
        6,
        8,
    )
    lay.add(
        series(
            "NeuronCore busy vs runtime-reported utilization",
            [
                (f"neuroncore_busy_ratio{{{I}}}", "{{instance}} nc{{neuroncore}} busy"),
                (
                    # the total is served for cores several runtimes report (the series budget, docs/fleet.md);
                    # a core one runtime holds has that runtime's utilization
                    f"neuroncore_utilization_total_ratio{{{I}}} or on (instance, neuroncore)"
                    f" sum by (instance, neuroncore) (neuroncore_utilization_ratio{{{I}}})",
                    "{{instance}} nc{{neuroncore}} runtimes",
                ),
            ],
            "percentunit",
            "Busy: the device's own count of time in use (every process on the core, driver >= 2.30.2). "
            "Runtimes: the sum of what every runtime on the core reports. Busy above runtimes is work no "
            "readable data block accounts for.",
            max_value=1,
        ),
        6,
        8,
    )

    lay.row("Network (EFA)")
    efa = "instance, efa_device, port, neuron_device_index"
    lay.add(
        series(
            "EFA throughput per port",
            [
                (
                    f"sum by ({efa}) (rate(efa_tx_bytes_total{{{I}}}[{RATE}]))",
                    "{{instance}} {{efa_device}}/{{port}} tx (nd {{neuron_device_index}})",
                ),
                (
                    f"sum by ({efa}) (rate(efa_rx_bytes_total{{{I}}}[{RATE}]))",
                    "{{instance}} {{efa_device}}/{{port}} rx (nd {{neuron_device_index}})",
                ),
            ],
            "Bps",
            "Bytes sent and received per second by each EFA adapter port (efa_counters group). Collectives run "
            "over these links: a port far below its peers while its Neuron devices are busy is worth a look.",
        ),
        10,
        8,
    )
    lay.add(
        series(
            "EFA retransmitted packets",
            [
                (
                    f"sum by ({efa}) (rate(efa_retrans_pkts_total{{{I}}}[{RATE}]))"
                    f" / (sum by ({efa}) (rate(efa_tx_pkts_total{{{I}}}[{RATE}])) > 0)",
                    "{{instance}} {{efa_device}}/{{port}} (nd {{neuron_device_index}})",
                )
            ],
            "percentunit",
            "Retransmitted packets as a share of packets sent. NeuronEfaRetransmitRatioHigh fires above 1 % for "
            "10 minutes: the fabric path or a peer is in trouble and every collective waits for the retries.",
        ),
        8,
        8,
    )
    lay.add(
        panel(
            "table",
            "EFA ports down or impaired",
            [
                target(f"efa_link_up{{{I}}} == 0", ref="A", instant=True, table=True),
                target(
                    f"increase(efa_impaired_remote_conn_events_total{{{I}}}[1h]) > 0"
                    f" or increase(efa_unresponsive_remote_events_total{{{I}}}[1h]) > 0",
                    ref="B",
                    instant=True,
                    table=True,
                ),
            ],
            description="A: ports whose link is not ACTIVE (or that vanished). B: ports that counted impaired or "
            "unresponsive remote connections in the last hour. Empty when the network is healthy.",
        ),
        6,
        8,
    )

    lay.row("Host and runtime CPU, memory")
    lay.add(
        series(
            "Host vCPU utilization",
            [(f"avg by (usage_type) (system_vcpu_usage_ratio{{{I}}})", "{{usage_type}}")],
            "percentunit",
            stacked=True,
            max_value=1,
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Host busy vCPUs by mode",
            [(f'sum by (mode) (rate(system_cpu_seconds_total{{{I},mode!="idle"}}[{RATE}]))', "{{mode}}")],
            "short",
            stacked=True,
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Host memory",
            [
                (f"sum(system_memory_used_bytes{{{I}}})", "used"),
                (f"sum(system_memory_total_bytes{{{I}}})", "total"),
                (f"sum(system_swap_used_bytes{{{I}}})", "swap used"),
            ],
            "bytes",
        ),
        8,
        8,
    )
    lay.add(
        series(
            "Runtime vCPU utilization",
            [
                (
                    f"sum by (runtime_tag, usage_type) (neuron_runtime_vcpu_usage_ratio{{{R}}})",
                    "{{runtime_tag}} {{usage_type}}",
                )
            ],
            "percentunit",
        ),
        12,
        8,
    )
    lay.add(
        series(
            "Host context switches / s",
            [(f"sum by (instance) (rate(system_context_switches_total{{{I}}}[{RATE}]))", "{{instance}}")],
            "ops",
        ),
        12,
        8,
    )

    lay.row("Exporter health")
    lay.add(series("Exporter up", [(f"neuron_exporter_up{{{I}}}", "{{instance}}")], max_value=1), 8, 7)
    lay.add(
        series("Report age", [(f"time() - neuron_exporter_last_report_timestamp_seconds{{{I}}}", "{{instance}}")], "s"),
        8,
        7,
    )
    lay.add(
        series(
            "Reports / s",
            [(f"sum by (instance) (rate(neuron_exporter_reports_total{{{I}}}[{RATE}]))", "{{instance}}")],
            "ops",
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Bad input lines / s",
            [
                (
                    f"sum by (instance, reason) (rate(neuron_exporter_bad_lines_total{{{I}}}[{RATE}]))",
                    "{{instance}} {{reason}}",
                )
            ],
            "ops",
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Metric group collection errors / s",
            [
                (
                    f"sum by (instance, group) (rate(neuron_exporter_group_errors_total{{{I}}}[{RATE}]))",
                    "{{instance}} {{group}}",
                )
            ],
            "ops",
        ),
        8,
        7,
    )
    lay.add(series("Series per node", [(f"neuron_exporter_series{{{I}}}", "{{instance}}")]), 8, 7)
    lay.add(
        series(
            "Driver nodes found",
            [(f'neuron_monitor_source_found{{{I},source="all"}}', "{{instance}} {{group}}")],
            max_value=1,
            description="1 when the daemon found every driver node family the group reads and this host must "
            "expose, 0 when one is missing (alert NeuronMonitorSourceMissing; which ones: "
            'neuron_monitor_source_found{source!="all"} == 0). Run neuron-monitor --check on the node.',
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Daemon skipped collections / s",
            [
                (
                    f"sum by (instance) (rate(neuron_monitor_daemon_skipped_collections_total{{{I}}}[{RATE}]))",
                    "{{instance}}",
                )
            ],
            "ops",
            "Collection slots the daemon skipped because its reader or a collection was slower than the period. "
            "No counts are lost (the next collection covers the gap), but the data is coarser: check the exporter.",
        ),
        8,
        7,
    )
    lay.add(
        series(
            "Daemon collection time",
            [(f"neuron_monitor_daemon_collection_duration_seconds{{{I}}}", "{{instance}}")],
            "s",
            "How long the daemon took to collect the newest report's groups.",
        ),
        8,
        7,
    )

    return {
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                },
                {
                    "datasource": DS,
                    "enable": True,
                    "hide": False,
                    "iconColor": "red",
                    "name": "neuron-monitor alerts",
                    "expr": FIRING,
                    "step": "60s",
                    "titleFormat": "{{alertname}}",
                    "textFormat": "{{severity}} on {{instance}} {{runtime_tag}} {{neuron_device_index}} {{neuroncore}}",
                    "tagKeys": "severity,alertname",
                    "useValueForTime": False,
                },
            ]
        },
        "description": "AWS Neuron (Trainium/Inferentia) hosts, from neuron-monitor and neuron-monitor-prometheus",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "links": [],
        "panels": lay.panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["neuron", "trainium", "inferentia", "aws"],
        "templating": {
            "list": [
                datasource_variable(),
                variable("instance", "Instance", "label_values(neuron_exporter_up, instance)"),
                variable(
                    "runtime", "Runtime tag", 'label_values(neuron_runtime_info{instance=~"$instance"}, runtime_tag)'
                ),
            ]
        },
        **settings("neuron-monitor", "neuron-monitor-prom", "now-1h"),
    }


def render() -> str:
    return to_json(build())


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
