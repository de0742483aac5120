"""What a leg's durable ledger row says while the leg runs.

A leg's row is made at its first billed answer and moved forward in place (ledger.py): until
the leg ends it says ``aborted`` with :data:`IN_FLIGHT` and what was billed so far, so after
a ``kill -9`` it is already true. The leg's end replaces it at the same ``seq``; an ended row
is replaced only by one holding more billed requests, never by a replayed in-flight one.
Stdlib only: ``orch status`` reads it without importing the database layer.
"""

IN_FLIGHT = "aborted: the orch process ended before this leg finished"
