"""What a chair must know before it weighs an answer: that it was cut, or left unfinished.

One set of marks for every chair (a fanout's, a deliberation's, a council's): an answer cut at
its output limit (``finish_reason`` ``length``, or ``truncated`` set by the context guard: its
text kept) and one a budget stopped before it finished (``finished: false``, a summary of
partial work). They are written in the answer's heading of the chair's packet.
"""

from __future__ import annotations

from typing import Any

CUT = "CUT: stopped at its output limit (OUTPUT_LENGTH); the answer is incomplete"


def unfinished(why: str | None) -> str:
    return (f"UNFINISHED: stopped on {why or 'a budget'} before finishing; a summary of "
            "partial work")


def marks_of(record: Any) -> list[str]:
    """The marks of a leg's answer (a :class:`~orchestrator.engine.record.LegRecord`, or its
    document as a dict), in the order they are shown."""
    if isinstance(record, dict):
        extra, finish = record, record.get("finish_reason")
    else:
        extra, finish = record.extra, record.finish_reason
    out = []
    if extra.get("truncated") or finish == "length":
        out.append(CUT)
    if extra.get("finished") is False:
        out.append(unfinished(extra.get("stopped")))
    return out
