"""CloudWatch exporter: report lines on stdin -> datums -> PutMetricData requests within the API limits, or EMF.

Modules: ``mapping`` (report -> datums), ``dimensions`` (dimension presets), ``datum`` (one datum and its encoding),
``limits`` (API limits, checked here), ``batching`` (packing requests), ``buffer`` (bounded drop-oldest queue),
``publisher`` (send loop with backoff), ``client`` (boto3 client), ``emf`` (Embedded Metric Format), ``cli``.
"""
