"""What orch does, whichever face asks: the operations `orch` (cli/), `orch mcp` (mcp_server/)
and `orch serve` (daemon/) share, so no face reaches into another.

Choose the models a run seats, prepare a wave or a council (every check before any spend),
query spend, list and show runs. Each takes plain values and returns plain values or
documents; a problem is an ``OrchError`` in one line, which each face says in its own way.
The faces import this package; it imports no face.
"""
