"""The report schema: named constants (``names``), the typed read layer (``read``) and one spec per group (``spec``;
each group's spec sits in its folder, ``neuron_monitor/groups/<name>/spec.py``) and the reader of report lines
from a byte stream that every consumer uses (``stream``). See docs/architecture.md."""
