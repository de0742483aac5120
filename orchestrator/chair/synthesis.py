"""The chair of a fanout (plain or structured) and of a deliberation: the packet each reads,
and for a structured synthesis, reading its block and the repair prompt.

A plain synthesis names answers by model (the chair attributes views). A structured one
names them by anonymous labels dealt in a shuffle seeded by the wave id, with model and vendor
names redacted from the answers by the council's anonymity rules, so the chair weighs what
was said; orch maps the labels back to legs in the document.
"""

from __future__ import annotations

from typing import Any

from orchestrator.chair import modes
from orchestrator.chair.marks import marks_of
from orchestrator.chair.packet import Answer, packet
from orchestrator.chair.structured import ENDING, Reader, repair_prompt
from orchestrator.engine.record import COMPLETE


def _answered(records: list[Any]) -> list[Any]:
    return [r for r in records if r.status == COMPLETE and (r.answer or "").strip()]


class FanoutChair:
    """One fanout's chair in ``mode`` (``plain`` or ``structured``, modes.SYNTHESES)."""

    def __init__(self, mode: str = "plain", *, seed: str = "", models: list[Any] = ()) -> None:
        self.mode = mode if mode in modes.SYNTHESES else "plain"
        self.seed, self.models = seed, list(models)
        self.labels: dict[str, Any] = {}  # label -> the leg's record (structured)
        self.reader: Reader | None = None

    @property
    def structured(self) -> bool:
        return self.mode == "structured"

    def packet(self, briefing: str, records: list[Any]) -> str | None:
        """The chair's briefing; None when no leg completed (nothing to synthesise)."""
        answers = _answered(records)
        if not answers:
            return None
        if not self.structured:
            return packet(role=modes.FANOUT, briefing=briefing, heading="The answers",
                          answers=[Answer(r.model, r.answer, marks_of(r), note=r.leg_id)
                                   for r in answers])
        from orchestrator.council.anonymity import identifying_terms
        from orchestrator.council.bundle import leaks, redact
        from orchestrator.deliberation.rules import deal_labels

        dealt = deal_labels(list(range(len(answers))), "chair", self.seed)
        self.labels = {label: answers[i] for label, i in dealt.items()}
        self.reader = Reader(list(self.labels))
        scaffold = packet(role=modes.STRUCTURED, briefing="", heading="The answers",
                          answers=[Answer("Answer A", "")], ending=ENDING, nonce="0")
        terms = [t for t in identifying_terms(self.models) if not leaks(scaffold, [t])]
        return packet(role=modes.STRUCTURED, briefing=briefing, heading="The answers",
                      answers=[Answer(label, redact(r.answer, terms), marks_of(r))
                               for label, r in self.labels.items()], ending=ENDING)

    def read(self, text: str, source: str | None = None) -> dict[str, Any]:
        assert self.reader is not None, "packet() deals the labels first"
        return self.reader.read(text, source)

    def repair(self, text: str, problem: str) -> str:
        return repair_prompt(text, problem, list(self.labels))

    def take_repair(self, first: dict[str, Any], text: str) -> dict[str, Any]:
        """The repair's block with the first reply's prose; the first reading if it is no
        better."""
        again = self.read(text, "re-prompt")
        if again["problem"]:
            return first
        return {**again, "prose": first["prose"]}

    def document(self, reading: dict[str, Any] | None) -> dict[str, Any] | None:
        """``synthesis`` in the wave document: the mode, the labels (answer → leg and model)
        and what was read."""
        if not self.structured:
            return None
        return {"mode": self.mode,
                "labels": {label: {"leg_id": r.leg_id, "model": r.model}
                           for label, r in self.labels.items()},
                **(reading or {"consensus": [], "disagreements": [], "unique": [],
                               "resolution": "", "prose": "", "source": None,
                               "problem": "the chair did not answer", "unknown_labels": []})}


def deliberation_packet(briefing: str, rounds: int, finals: list[dict[str, Any]]) -> str:
    """A deliberation's chair: each distinct final answer once, with the models holding it,
    its votes and whether it is the winner, and the marks of the answer (cut, unfinished).
    ``finals``: ``{"models", "text", "marks", "votes", "winner"}`` per distinct answer."""
    answers = []
    for f in finals:
        note = f"{f['votes']} vote(s) in the last round with votes" + (
            " (the winner)" if f.get("winner") else "")
        if len(f["models"]) > 1:
            note = f"held by {len(f['models'])} legs; {note}"
        answers.append(Answer(", ".join(f["models"]), f["text"], list(f.get("marks") or []),
                              note=note))
    return packet(role=modes.DELIBERATION.format(rounds=rounds), briefing=briefing,
                  heading="The final answers", answers=answers)
