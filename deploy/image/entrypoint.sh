#!/bin/sh
# /opt/bin/entrypoint.sh in the image: the command line of AWS's neuron-monitor image entrypoint
#   entrypoint.sh --port 8000 --neuron-monitor-config FILE [--cert-file F --key-file F] [--core-labels aws|device]
# starting neuron-monitor | neuron-monitor-prometheus (see neuron_monitor/daemon/entrypoint.py and
# docs/migrating-from-aws.md). The interpreter is named by its path because AWS's add-on replaces PATH;
# NEURON_MONITOR_PYTHON points elsewhere (a virtualenv, a test). neuron_monitor.launch blocks SIGHUP, SIGINT and
# SIGTERM before the entrypoint's modules are imported (a signal while starting is handled, not fatal).
exec "${NEURON_MONITOR_PYTHON:-/opt/neuron-monitor/bin/python}" -m neuron_monitor.launch entrypoint "$@"
