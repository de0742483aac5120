"""A fanout contestant with ``rounds = N`` (N ≥ 2): each trial is one deliberation, run by
the code ``orch fanout --rounds`` runs (orchestrator/deliberation), over the trial folder, on
the bench's shared server and under its one cost ceiling.

The graded answer is the chair's synthesis when the contestant has a chair; with
``aggregate = "vote"`` the majority of the legs' final answers; else the deliberation's
winner: by votes, or, when no vote counted, the answer held by the most legs (then the leg
earliest in ``models``), votes/tally.py. The trial's
cost is every request of every round (repairs and the chair too): ledger rows with
``run_id`` = the bench id and wave ids ``<bench>-tNNNN-round-<r>``. Its row's
``deliberation`` says how many rounds ran and which rule stopped it (docs/bench.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from orchestrator.bakeoff.ensemble import usage_of
from orchestrator.bakeoff.trial import Ended, keep_answer
from orchestrator.engine.record import ABORTED, COMPLETE

Runner = Slot = Any  # orchestrator.bakeoff.run's, which calls these (no import: no cycle)


@dataclass
class DeliberationAttempt:
    """One deliberating trial: one deliberation over the trial folder."""

    runner: Runner
    slot: Slot
    run: Any = None
    doc: dict[str, Any] | None = None
    secs: float = 0.0

    def turn(self):
        return self.runner.model_limit

    async def skip(self, why: str | None) -> None:
        return None

    async def start(self, folder) -> None:
        from orchestrator.bakeoff.ensemble import trial_spec
        from orchestrator.deliberation.run import Deliberation

        runner, c = self.runner, self.slot.contestant
        spec = trial_spec(runner, self.slot, runner.resolved[c.name], folder)
        self.run = run = Deliberation(
            spec, pm=runner.pms[c.name], config=runner.config, rounds=c.rounds,
            peers=c.peers, ledger=runner.ledger, server=runner.server,
            account=runner.account)
        runner.waves.append(run)  # an interrupt stops it as it stops a wave
        started = time.monotonic()
        try:
            self.doc = await run.run()
        finally:
            self.secs = time.monotonic() - started

    def ended(self) -> Ended | None:
        if self.run is None:
            return None
        return deliberation_ended(self.run, self.doc or self.run.document(), self.secs)


def deliberation_ended(run, doc: dict[str, Any], secs: float) -> Ended:
    """The deliberation's usage, cost, rounds and stop rule; the answer to grade, when it
    ended with one."""
    records = run.records  # every round's, its repairs' and the chair's
    known = [r.cost_usd for r in records]
    cost = None if any(x is None for x in known) else round(sum(known), 10)
    win = doc.get("winner")
    if run.spec.chair is not None:
        chair = run.chair
        answer = chair.answer if chair is not None and chair.status == COMPLETE else None
        status = chair.status if chair is not None else ABORTED
        reason = None if answer is not None else (
            chair.reason if chair is not None else "the chair never ran")
        source = "chair"
    elif doc.get("aggregate"):
        from orchestrator.votes.aggregate import answer_of

        answer, source = answer_of(doc["aggregate"]), "vote"
        status = COMPLETE if answer else (doc.get("status") or ABORTED)
        reason = None if answer else "no leg answered"
    else:
        answer = win.get("answer") if win else None
        source = "winner" if win and win.get("by") == "votes" else "most held (no vote counted)"
        status = COMPLETE if answer else (doc.get("status") or ABORTED)
        reason = None if answer else "no leg answered"
    stop = doc.get("stop") or {}
    deliberation = {
        "rounds": len(doc.get("rounds") or []), "max_rounds": run.max_rounds,
        "peers": run.peers, "stop": stop.get("rule"), "after_round": stop.get("after_round"),
        "also": stop.get("also") or [], "answer_from": source,
        "winner_votes": win.get("votes") if win else None,
        "vote": {k: doc["aggregate"][k] for k in ("outcome", "answers", "of_legs",
                                                  "tie_break")}
        if doc.get("aggregate") else None,
        "requests": sum(r.requests for r in records),
        "per_round": [{"round": r["round"], "changed": r["changed"],
                       "requests": r["requests"], "cost_usd": r["cost_usd"]}
                      for r in doc.get("rounds") or []],
        "degraded": doc.get("degraded") or []}
    return Ended(
        status=status, reason=reason, answers=(answer or "",) if status == COMPLETE else (),
        excluded=f"not launched: {run.refusals[0]['reason']}" if run.refusals and not answer
        else None,
        fields=dict(command=run.run_id, answer=keep_answer(answer or ""),
                    answer_chars=len(answer or ""),
                    leg_id=run.chair.leg_id if run.chair is not None else None,
                    **usage_of(records), secs=round(secs, 3), cost_usd=cost,
                    cost_source="deliberation" if cost is not None else "unknown",
                    wave_id=run.run_id, deliberation=deliberation))
