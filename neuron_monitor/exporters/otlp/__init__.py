"""neuron-monitor-otlp: pushes neuron-monitor report lines (stdin) over OTLP/HTTP, one request per report.

Flow: ``cli`` reads reports with ``schema.stream`` -> the Prometheus exporter's ``SnapshotBuilder`` counts and
shapes each into the families ``neuron-monitor-prometheus`` would serve (same names, labels and values) ->
``model`` turns them into OTLP metrics (``naming``: Prometheus names or OpenTelemetry semantic conventions; start
times of cumulative sums) -> ``wire`` (protobuf) or ``jsonwire`` (OTLP/JSON) encodes requests under a size cap ->
``buffer`` holds them (bounded, oldest dropped) -> ``sender`` delivers them through ``transport`` (total deadline,
retries with backoff and jitter, ``Retry-After``, partial success), signed by ``sigv4`` when asked.
"""
