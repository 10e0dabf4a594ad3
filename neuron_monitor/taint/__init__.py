"""``neuron-monitor-taint``: DRA DeviceTaintRules for Neuron devices whose health verdict stays unhealthy."""
