"""Metric groups, one folder each (``<name>/``): ``collector.py`` (what the daemon reads, ``GROUP``), ``spec.py``
(what the report carries and how every consumer shows it, ``SPEC``). ``base.py`` and ``data_block_group.py`` are
the collectors' shared bases; ``registry.py`` finds a group's collector by name.

This package imports nothing: a consumer that reads specs never loads the collectors."""
