"""The report schema: named constants (``names``), the typed read layer (``read``) and one spec per group (``spec``;
each group's spec sits in its folder, ``neuron_monitor/groups/<name>/spec.py``). See docs/architecture.md."""
