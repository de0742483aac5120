"""``--aggregate vote``: the majority over a run's final answers, as the wave document holds it
(``aggregate`` in ``--json`` and ``wave.json``), for a fanout, a deliberation and a bench
trial alike."""

from __future__ import annotations

from typing import Any

from orchestrator.votes.answer import digest
from orchestrator.votes.tally import majority

METHODS = ("vote",)


def _get(record: Any, key: str) -> Any:
    return record.get(key) if isinstance(record, dict) else getattr(record, key, None)


def vote(records: list[Any]) -> dict[str, Any]:
    """The vote over ``records`` (leg records or their dicts, in the order of ``--models``):
    every complete leg with an answer is one vote for its normalised answer. The winner's
    ``answer`` is the text of the earliest leg holding it."""
    answered = [(n, r) for n, r in enumerate(records, start=1)
                if _get(r, "status") == "complete" and (_get(r, "answer") or "").strip()]
    holdings = {n: digest(_get(r, "answer")) for n, r in answered}
    by_n = dict(answered)
    counted = majority(holdings)

    def legs(ns: list[int]) -> dict[str, list[str]]:
        return {"leg_ids": [_get(by_n[n], "leg_id") for n in ns],
                "models": [_get(by_n[n], "model") for n in ns]}

    groups = [{"digest": g["digest"], "votes": g["votes"], **legs(g["legs"]),
               "answer": _get(by_n[g["legs"][0]], "answer")} for g in counted["groups"]]
    winner = None
    if counted["digest"] is not None:
        winner = {"digest": counted["digest"], "votes": counted["votes"],
                  **legs(counted["legs"]), "answer": groups[0]["answer"]}
    return {"method": "vote", "outcome": counted["outcome"], "answers": counted["answers"],
            "of_legs": len(records), "winner": winner, "tied_with": counted["tied_with"],
            "tie_break": counted["tie_break"], "groups": groups}


def answer_of(aggregate: dict[str, Any] | None) -> str | None:
    """The answer a vote ends on (None: no leg answered)."""
    win = (aggregate or {}).get("winner") or {}
    return win.get("answer")
