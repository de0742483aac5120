"""What a deliberation ends on and records: each leg (a :class:`Seat`) across rounds, its line
in a round (its answer, decision and vote, as cast and as counted), the distinct final
answers, every vote resolved on what the legs hold now, the winner, and each leg's final
record. Pure functions of the seats and the votes cast; counting itself is votes/tally.py's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from orchestrator.deliberation.reply import Reading
from orchestrator.engine.record import COMPLETE, ERROR, LegRecord
from orchestrator.models.addressing import ResolvedModel
from orchestrator.request import Usage
from orchestrator.votes import tally


@dataclass
class Seat:
    """One leg across rounds: its current answer and its own conversation."""

    n: int  # 1-based, in the order of --models
    model: ResolvedModel
    answer: str = ""
    digest: str | None = None
    in_play: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    records: list[LegRecord] = field(default_factory=list)
    last_input: int = 0  # the prompt tokens its last request reported (cost bound's anchor)
    # the round whose reply in its own conversation holds its answer word for word (its
    # round-1 answer, a revision's text); None after an adoption: the prompt then writes it
    answer_round: int | None = None
    marks: list[str] = field(default_factory=list)  # its answer's chair marks (cut, ...)


def holdings(seats: list[Seat]) -> dict[int, str]:
    """Each leg's answer now (leg -> digest), in play or not: a leg that left keeps its
    answer."""
    return {s.n: s.digest for s in seats if s.digest}


def leg_entry(seat: Seat, rec: LegRecord | None, reading: Reading | None, *,
              changed: bool | None, vote: tally.Vote | None = None,
              now: dict[int, str] | None = None) -> dict[str, Any]:
    """One leg's line in a round: its answer now, its decision and its vote, as cast
    (``shown_digest``, the legs that held it) and as counted at the end of the round
    (``answer_digest``; None and ``vote_problem`` when it counts for none)."""
    counted, problem = tally.resolve(vote, now or {}) if vote else (None, None)
    return {
        "leg": seat.n, "model": seat.model.name,
        "leg_id": rec.leg_id if rec else None, "status": rec.status if rec else None,
        "answer_digest": seat.digest if seat.answer else None,
        "changed": changed,
        "decision": reading.decision if reading else None,
        "readable": None if reading is None else reading.problem is None,
        "problem": reading.problem if reading else None,
        "source": reading.source if reading else None,
        "vote": None if vote is None else {
            "label": reading.vote, "leg": vote.shown_legs[0], "legs": list(vote.shown_legs),
            "shown_digest": vote.shown, "answer_digest": counted},
        "vote_problem": problem or (reading.vote_problem if reading else None),
        "reason": reading.reason if reading else None,
        "tokens": rec.usage.to_dict() if rec else Usage().to_dict(),
        "cost_usd": rec.cost_usd if rec else 0.0,
    }


def final_answers(seats: list[Seat]) -> list[dict[str, Any]]:
    """Each distinct final answer once, with the legs holding it (in --models order)."""
    out: dict[str, dict[str, Any]] = {}
    for s in seats:
        if not s.digest:
            continue
        f = out.setdefault(s.digest, {"digest": s.digest, "answer": s.answer, "legs": [],
                                      "models": [], "marks": list(s.marks)})
        f["legs"].append(s.n)
        f["models"].append(s.model.name)
    return list(out.values())


def votes(cast: list[list[tally.Vote]], now: dict[int, str]) -> list[list[dict[str, Any]]]:
    """Every vote of every round, as cast and as it counts ``now`` (``for_digest``; None
    with ``problem`` when it counts for none)."""
    out = []
    for round_cast in cast:
        row = []
        for v in round_cast:
            counted, problem = tally.resolve(v, now)
            row.append({"voter": v.voter, "shown_digest": v.shown,
                        "for_legs": list(v.shown_legs), "for_digest": counted,
                        "problem": problem})
        out.append(row)
    return out


def last_votes(cast: list[list[tally.Vote]], now: dict[int, str]) -> dict[str, int]:
    """digest -> votes it counts in the last round with counted votes (what the winner rule
    reads first)."""
    counted = [[v["for_digest"] for v in r if v["for_digest"]] for r in votes(cast, now)]
    last = [r for r in counted if r]
    counts: dict[str, int] = {}
    for d in last[-1] if last else []:
        counts[d] = counts.get(d, 0) + 1
    return counts


def winner(seats: list[Seat], cast: list[list[tally.Vote]]) -> dict[str, Any] | None:
    """votes/tally.winner over what the seats hold now, with the models and words."""
    win = tally.winner(cast, holdings(seats))
    if win is None:
        return None
    return {**win, "models": [seats[n - 1].model.name for n in win["legs"]],
            "answer": next(s.answer for s in seats if s.digest == win["digest"])}


def final_records(seats: list[Seat], first_wave: str, failure: str | None) -> list[LegRecord]:
    """Each leg's record as the run ends: its last round's, holding its final answer, its
    usage, cost and requests summed over its rounds (``first_wave``: round 1's wave id, for
    a leg that never ran)."""
    finals = []
    for seat in seats:
        if not seat.records:  # its first wave never ran (a wave_start refusal)
            finals.append(LegRecord(
                leg_id=f"{first_wave}-{seat.n}", model=seat.model.name, wave_id=first_wave,
                provider=seat.model.provider, status=ERROR, reason=failure or "not run"))
            continue
        rec = copy.deepcopy(seat.records[-1])
        rec.answer = seat.answer or rec.answer
        if seat.answer:
            rec.status, rec.reason = COMPLETE, None
        rec.usage = sum((r.usage for r in seat.records), Usage())
        costs = [r.cost_usd for r in seat.records]
        rec.cost_usd = None if None in costs else round(sum(costs), 10)
        rec.requests = sum(r.requests for r in seat.records)
        rec.extra = {**rec.extra, "leg_ids": [r.leg_id for r in seat.records],
                     "answer_digest": seat.digest, "answer_marks": seat.marks}
        finals.append(rec)
    return finals
