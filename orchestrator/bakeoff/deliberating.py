"""A fanout contestant with ``rounds = N`` (N ≥ 2): each trial is one deliberation, run by
the code ``orch fanout --rounds`` runs (orchestrator/deliberation), over the trial folder, on
the bench's shared server and under its one cost ceiling.

The graded answer is the chair's synthesis when the contestant has a chair; else the final
answer of the winner by votes; when no vote was cast (the run stopped after round 1), the
answer of the leg earliest in ``models`` (the winner rule's last tie-break). The trial's
cost is every request of every round (repairs and the chair too): ledger rows with
``run_id`` = the bench id and wave ids ``<bench>-tNNNN-round-<r>``. Its row's
``deliberation`` says how many rounds ran and which rule stopped it (docs/bench.md)."""

from __future__ import annotations

import time
from typing import Any

import anyio

from orchestrator.engine.record import ABORTED, COMPLETE

Runner = Slot = Any  # orchestrator.bakeoff.run's, which calls these (no import: no cycle)


async def trial(runner: Runner, slot: Slot) -> None:
    """One deliberating trial: a fresh folder, one deliberation, graded."""
    from orchestrator.bakeoff.ensemble import trial_spec
    from orchestrator.deliberation.run import Deliberation

    c = slot.contestant
    ensemble = runner.resolved[c.name]
    row, folder, run, doc, secs = runner.base_row(slot), None, None, None, 0.0
    try:
        async with runner.model_limit:
            if runner.signum is not None:  # interrupted while it waited: never started
                return
            folder = await runner.folder(slot.task, row)
            if folder is not None and runner.signum is None:
                spec = trial_spec(runner, slot, ensemble, folder)
                run = Deliberation(spec, pm=runner.pms[c.name], config=runner.config,
                                   rounds=c.rounds, peers=c.peers, ledger=runner.ledger,
                                   server=runner.server, account=runner.account)
                runner.waves.append(run)  # an interrupt stops it as it stops a wave
                started = time.monotonic()
                doc = await run.run()
                secs = time.monotonic() - started
        if run is not None:
            answer = _row(row, run, doc, runner.keep_answer, secs)
            if runner.signum is not None:  # the interrupt stopped it: cut short
                await runner.finish(slot, folder, runner._cut(row))
                return
            if answer is None:
                row["passed"] = False
            else:
                await runner.grade(slot, folder, row, answer)
        elif folder is not None and row["excluded"] is None:  # interrupted before it began
            await runner.finish(slot, folder, None)
            return
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            if run is not None:
                _row(row, run, run.document(), runner.keep_answer, secs)
            await runner.finish(slot, folder, runner._cut(row) if run is not None else None)
        raise
    except BaseException:
        await runner.finish(slot, folder, None)
        raise
    await runner.finish(slot, folder, row)


def _row(row: dict[str, Any], run, doc: dict[str, Any], keep, secs: float) -> str | None:
    """The deliberation's usage, cost, rounds and stop rule in the trial's row; the answer
    to grade (None: it ended without one)."""
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
    else:
        answer, source = (win.get("answer"), "winner") if win and win.get("answer") else (
            next((s.answer for s in run.seats if s.answer), None), "first leg (no votes)")
        status = COMPLETE if answer else (doc.get("status") or ABORTED)
        reason = None if answer else "no leg answered"
    stop = doc.get("stop") or {}
    row.update(command=run.run_id, status=status, reason=reason,
               answer=keep(answer or ""), answer_chars=len(answer or ""),
               leg_id=run.chair.leg_id if run.chair is not None else None,
               input_tokens=sum(r.usage.input_tokens for r in records),
               output_tokens=sum(r.usage.output_tokens for r in records),
               cached_tokens=sum(r.usage.cached_tokens for r in records),
               steps=sum(r.steps for r in records), secs=round(secs, 3), cost_usd=cost,
               cost_source="deliberation" if cost is not None else "unknown",
               wave_id=run.run_id)
    row["tokens"] = row["input_tokens"] + row["output_tokens"]
    row["deliberation"] = {
        "rounds": len(doc.get("rounds") or []), "max_rounds": run.max_rounds,
        "peers": run.peers, "stop": stop.get("rule"), "after_round": stop.get("after_round"),
        "also": stop.get("also") or [], "answer_from": source,
        "winner_votes": win.get("votes") if win else None,
        "requests": sum(r.requests for r in records),
        "per_round": [{"round": r["round"], "changed": r["changed"],
                       "requests": r["requests"], "cost_usd": r["cost_usd"]}
                      for r in doc.get("rounds") or []],
        "degraded": doc.get("degraded") or []}
    if run.refusals and row["excluded"] is None and not answer:
        row["excluded"] = f"not launched: {run.refusals[0]['reason']}"
    return answer
