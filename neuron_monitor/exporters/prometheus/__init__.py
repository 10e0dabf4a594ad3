"""neuron-monitor-prometheus: serves neuron-monitor report lines (stdin) as Prometheus metrics.

Flow: ``ingest`` reads reports -> ``snapshot`` shapes each into an immutable ``Snapshot`` (metric families plus
accumulated counters) -> ``collector`` turns the newest snapshot into fresh client_python families per scrape ->
``server`` serves ``/metrics``, ``/healthz`` and ``/`` over HTTP or TLS with optional basic auth.
"""
