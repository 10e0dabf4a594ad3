"""The ``neuron_runtime_vcpu_usage`` metric group: ``collector.py``, what the daemon reads; ``spec.py``, what the
report carries and how every consumer shows it; ``sim.py``, the simulator's part that imitates its sources."""
