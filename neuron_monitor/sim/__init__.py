"""The simulator: instance shapes, workload, the writer of the sysfs/dev/proc trees, its animation and ground truth."""
