"""Neuron device layer: driver sysfs, device discovery and hardware info, data-block parsing, device backend."""
