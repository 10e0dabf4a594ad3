"""neuron-monitor: a drop-in re-implementation of AWS's neuron-monitor daemon and its exporters."""

__version__ = "0.1.0"
