"""The ``memory_used`` metric group: ``collector.py``, what the daemon reads; ``spec.py``, what the report
carries and how every consumer shows it."""
