"""`neuron-monitor-top`: a live terminal view of neuron-monitor reports.

Layers, each testable alone: `model` (report -> what to show, no terminal), `layout` (screen model -> lines of
styled text for a given size and view), `sources` (own collection, report lines from stdin, a recording),
`controls` (keys -> state changes), `terminal` (the only module that imports the terminal library) and `cli`.
The daemon and the exporters never import this package.
"""
