"""The ``efa_counters`` metric group: ``collector.py``, what the daemon reads (with ``sysfs.py``, the typed readers of
the kernel's RDMA sysfs, and ``topology.py``, the PCI join to Neuron devices); ``spec.py``, what the report carries
and how every consumer shows it; ``sim.py``, the simulator's part that imitates its sources; ``README.md``;
``testdata/``, real-format bytes for its tests."""
