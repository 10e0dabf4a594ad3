"""The Neuron device layer as it was before the performance work (commit 2dd70f1), frozen: the oracle.

These modules are verbatim copies of neuron_monitor/neuron/{apps,appsinfo,datablock,deltas,devio}.py and the four
Neuron groups (neuroncore_counters, execution_stats, memory_used, neuron_hw_counters), with only their imports
pointed here. tests/neuron/test_equivalence.py runs them and the current code on the same simulator bytes at the
same clock and requires identical bodies. Change them only to follow an intended change of output, in the same
commit as the change, and say so in its message.
"""
