"""`neuron-monitor --check` (the sources the daemon reads on this host, one line each) and the pieces
`--capture` shares with it."""
