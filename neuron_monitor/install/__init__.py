"""The host files the package carries (systemd units, configurations, rules, manifests, dashboards) and
``neuron-monitor-install``, which lists, prints and writes them out."""
