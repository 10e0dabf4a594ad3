"""``neuron-monitor-health``: the one-shot health check (cli.py) and what it reads from an exporter (exporter.py)."""
