"""The daemon, ``neuron-monitor``, its layers top to bottom: ``cli`` (process, signals, reloads; ``config``,
``config_watch``), ``scheduler`` (periods, due times), ``collection/`` (group instances, applications, report
assembly) calling the groups (``neuron_monitor.groups``) that read the sources (``neuron_monitor.neuron``,
``neuron_monitor.host``), then ``report`` (shape, encoder) and ``output`` (one line per report on stdout).
``entrypoint`` is the container image's entrypoint (daemon | Prometheus exporter)."""
