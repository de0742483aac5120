"""The chair: after the legs, one model reads every complete answer and writes one synthesis."""

from __future__ import annotations

from orchestrator.engine.record import COMPLETE, LegRecord

CHAIR_BRIEF = """You are the chair. Several models were given the same briefing, reproduced \
below, and answered independently. Read their answers and write one synthesis: what they agree \
on, where they differ and which side the evidence favours, and your own conclusion. Name the \
models when you attribute a view. Do not invent facts that no answer supports."""


def answer_marks(record: LegRecord) -> list[str]:
    """What the chair must know before weighing an answer, as the council marks a CUT review:
    an answer cut at its output limit (``OUTPUT_LENGTH``, text kept) and one a budget stopped
    before it finished (``finished: false``)."""
    marks = []
    if record.extra.get("truncated"):
        marks.append("CUT: stopped at its output limit (OUTPUT_LENGTH); the answer is incomplete")
    if record.extra.get("finished") is False:
        why = record.extra.get("stopped") or "a budget"
        marks.append(f"UNFINISHED: stopped on {why} before finishing; a summary of partial work")
    return marks


def chair_packet(briefing: str, legs: list[LegRecord]) -> str | None:
    """The chair's briefing: the original briefing and every complete answer, labelled by model
    and marked where it was cut or unfinished. None when no leg completed (there is nothing to
    synthesise)."""
    answers = [r for r in legs if r.status == COMPLETE and (r.answer or "").strip()]
    if not answers:
        return None
    parts = [CHAIR_BRIEF, "", "## The briefing", "", briefing.strip(), "",
             f"## The answers ({len(answers)})"]
    for r in answers:
        head = "; ".join([r.leg_id, *answer_marks(r)])
        parts += ["", f"### {r.model} ({head})", "", r.answer.strip()]
    return "\n".join(parts) + "\n"
