"""Exporters: consume neuron-monitor report lines and publish them (Prometheus, CloudWatch)."""
