"""Ensemble contestants: ``kind = "fanout"`` sends each trial to several models at once (one
wave, the trial folder as every leg's workspace) and, with a ``chair``, has the chair write
the one answer the hidden check grades. Without a chair there is no one answer to grade, so
the trial passes when any member's answer passes: an oracle, the ceiling a perfect chair
could reach (the report's line says which). Every trial is its own wave on the bench's
shared server, under its one cost ceiling; its cost is the wave's (members and chair)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import anyio

from orchestrator.engine.record import ABORTED, COMPLETE

Runner = Slot = Any  # orchestrator.bakeoff.run's, which calls these (no import: no cycle)


@dataclass
class Ensemble:
    """A fanout contestant's resolved members and chair."""

    members: list[Any]
    chair: Any | None = None
    kind: str = "fanout"
    rounds: int = 1  # 2 or more: each trial is a deliberation (bakeoff/deliberating.py)

    @property
    def name(self) -> str:
        return f"{self.kind}({','.join(m.name for m in self.members)})" + (
            f"+chair {self.chair.name}" if self.chair else "") + (
            f" ×{self.rounds} rounds" if self.rounds > 1 else "")

    @property
    def models(self) -> list[Any]:
        return [*self.members, *([self.chair] if self.chair else [])]

    @property
    def requests(self) -> list[Any]:
        """The model of each request a trial makes at least, for the estimate: a council's
        seats review and then judge; a deliberation's legs answer in every round (at most
        ``rounds`` × legs: it may stop sooner)."""
        seats = self.members * (2 if self.kind == "council" else self.rounds)
        return [*seats, *([self.chair] if self.chair else [])]


def trial_spec(runner: Runner, slot: Slot, ensemble: Ensemble, folder):
    """The wave a fanout trial runs (one round, or a deliberation's): its members and chair
    in the trial's folder, the bench's ceiling over every trial, rows under the bench's id."""
    from orchestrator.engine.wave import WaveSpec

    c = slot.contestant
    options: dict[str, Any] = {"plugins": True, "tools": c.tools,
                               "bench_tier": c.tier, "workspace": str(folder)}
    # the bench's ceilings, over every trial: its account holds them; what is left now
    options.update({k: runner.account.left(k) for k, v in runner.plan.ceilings.items()
                    if v is not None})
    return WaveSpec(models=list(ensemble.members), chair=ensemble.chair,
                    briefing=runner.plan.render(slot.task),
                    runs_dir=runner.runs_dir, timeout_s=runner.plan.timeout_s,
                    max_steps=c.max_steps, kind="bench", run_id=runner.bench_id,
                    wave_id=f"{runner.bench_id}-{runner.wave_prefix}t{slot.n:04d}",
                    project_dir=os.getcwd(), workspace=folder, options=options)


async def trial(runner: Runner, slot: Slot) -> None:
    """One fanout trial: a fresh folder, one wave (members, then the chair), graded."""
    from orchestrator.engine.wave import Wave

    c = slot.contestant
    ensemble: Ensemble = runner.resolved[c.name]
    row, folder, wave = runner.base_row(slot), None, None
    try:
        async with runner.model_limit:
            if runner.signum is not None:  # interrupted while it waited: never started
                return
            folder = await runner.folder(slot.task, row)
            if folder is not None and runner.signum is None:
                spec = trial_spec(runner, slot, ensemble, folder)
                wave = Wave(spec, pm=runner.pms[c.name], config=runner.config,
                            ledger=runner.ledger, server=runner.server,
                            account=runner.account)
                runner.waves.append(wave)
                await wave.run()
        if wave is not None:
            answers = _row(row, wave, runner.keep_answer)
            if runner.signum is not None:  # the interrupt stopped the wave: cut short
                await runner.finish(slot, folder, runner._cut(row))
                return
            await _grade(runner, slot, folder, row, answers)
        elif folder is not None and row["excluded"] is None:  # interrupted before its wave
            await runner.finish(slot, folder, None)
            return
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            if wave is not None:
                _row(row, wave, runner.keep_answer)
            await runner.finish(slot, folder, runner._cut(row) if wave is not None else None)
        raise
    except BaseException:
        await runner.finish(slot, folder, None)
        raise
    await runner.finish(slot, folder, row)


def _row(row: dict[str, Any], wave, keep) -> list[str]:
    """The wave's usage, cost and status in the trial's row; the answers to grade (the
    chair's, or every complete member's). ``keep``: what of an answer the row keeps."""
    records = [*wave.records, *([wave.chair.record] if wave.chair else [])]
    known = [r.cost_usd for r in records]
    cost = None if any(x is None for x in known) else sum(known)
    chair = wave.chair.record if wave.chair else None
    if wave.spec.chair is not None:
        answers = [chair.answer or ""] if chair is not None and chair.status == COMPLETE \
            else []
        status = chair.status if chair is not None else ABORTED
        reason = chair.reason if chair is not None else "the chair never ran"
    else:
        answers = [r.answer or "" for r in wave.records if r.status == COMPLETE]
        status = COMPLETE if answers else wave.status
        reason = None if answers else "no member completed"
    shown = answers[0] if len(answers) == 1 else "\n\n".join(
        f"--- member {i}\n{a}" for i, a in enumerate(answers, start=1))
    row.update(command=wave.wave_id, status=status, reason=reason,
               answer=keep(shown), answer_chars=len(shown),
               leg_id=(chair.leg_id if chair is not None else None),
               input_tokens=sum(r.usage.input_tokens for r in records),
               output_tokens=sum(r.usage.output_tokens for r in records),
               cached_tokens=sum(r.usage.cached_tokens for r in records),
               steps=sum(r.steps for r in records),
               secs=round(max((r.duration_s or 0.0) for r in records) if records else 0.0, 3),
               cost_usd=cost, cost_source="ensemble" if cost is not None else "unknown",
               wave_id=wave.wave_id)
    row["tokens"] = row["input_tokens"] + row["output_tokens"]
    refused = [r for r in wave.budget_refusals]
    if refused and row["excluded"] is None and not answers:
        row["excluded"] = f"not launched: {refused[0]['reason']}"
    return answers


async def _grade(runner: Runner, slot: Slot, folder, row: dict[str, Any],
                 answers: list[str]) -> None:
    """The chair's answer graded; without a chair, each member's until one passes."""
    if not answers:
        row["passed"] = False
        return
    for answer in answers:
        await runner.grade(slot, folder, row, answer)
        if row["passed"] or row["excluded"] is not None:
            return


async def council_trial(runner: Runner, slot: Slot) -> None:
    """One council trial: a fresh folder, one ``orch council`` run over it (reviews,
    judging, tally, chair) on the bench's shared server. The graded answer is the council's
    findings, most agreed first (``LOCATION: [tier] claim``, one a line), then the chair's
    synthesis: a check that reads locations (the ``review`` suite) sees what the council
    stands behind first."""
    from orchestrator.council.preflight import Plan as CouncilPlan
    from orchestrator.council.run import CouncilRun

    c = slot.contestant
    ensemble: Ensemble = runner.resolved[c.name]
    row, folder, council = runner.base_row(slot), None, None
    try:
        async with runner.model_limit:
            if runner.signum is not None:  # interrupted while it waited: never started
                return
            folder = await runner.folder(slot.task, row)
            if folder is not None and runner.signum is None:
                options: dict[str, Any] = {"plugins": True, "tools": c.tools,
                                           "workspace": str(folder)}
                options.update({k: runner.account.left(k)  # what the bench has left now
                                for k, v in runner.plan.ceilings.items() if v is not None})
                plan = CouncilPlan(seats=list(ensemble.members), chair=ensemble.chair,
                                   briefing=runner.plan.render(slot.task))
                council = CouncilRun(plan, pm=runner.pms[c.name], config=runner.config,
                                     runs_dir=runner.runs_dir, timeout_s=runner.plan.timeout_s,
                                     max_steps=c.max_steps, project_dir=os.getcwd(),
                                     workspace=folder, options=options,
                                   account=runner.account,
                                     run_id=f"{runner.bench_id}-{runner.wave_prefix}"
                                            f"t{slot.n:04d}")
                council.server = runner.server
                runner.waves.append(council)  # an interrupt stops it as it stops a wave
                started = time.monotonic()
                doc = await council.run()
                doc["bench_secs"] = time.monotonic() - started
        if council is not None:
            answer = _council_row(row, council, doc, runner.keep_answer)
            if runner.signum is not None:  # the interrupt stopped the council: cut short
                await runner.finish(slot, folder, runner._cut(row))
                return
            if answer is not None:
                await runner.grade(slot, folder, row, answer)
        elif folder is not None and row["excluded"] is None:  # interrupted before it began
            await runner.finish(slot, folder, None)
            return
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await runner.finish(slot, folder, runner._cut(row) if council is not None
                                else None)
        raise
    except BaseException:
        await runner.finish(slot, folder, None)
        raise
    await runner.finish(slot, folder, row)


def _council_row(row: dict[str, Any], council, doc: dict[str, Any], keep) -> str | None:
    """The council's usage, cost and status in the row; the answer to grade (None: the
    council ended without one)."""
    records = council.records
    groups = (council.tally or {}).get("groups") or []
    findings = "\n".join(f"{g.get('location') or '?'}: [{g.get('tier')}] {g.get('claim', '')}"
                         for g in groups)
    synthesis = council.chair.synthesis or ""
    answer = (findings + ("\n\n" + synthesis if synthesis else "")).strip()
    ok = doc.get("status") in ("complete", "degraded")
    row.update(command=f"council-{council.run_id}", status=COMPLETE if ok else "error",
               reason=None if ok else (doc.get("error") or doc.get("status")),
               answer=keep(answer), answer_chars=len(answer),
               input_tokens=sum(r.usage.input_tokens for r in records),
               output_tokens=sum(r.usage.output_tokens for r in records),
               cached_tokens=sum(r.usage.cached_tokens for r in records),
               steps=sum(r.steps for r in records),
               secs=round(float(doc.get("bench_secs") or 0.0), 3),
               cost_usd=doc.get("cost_usd"),
               cost_source="council" if doc.get("cost_usd") is not None else "unknown",
               wave_id=f"council-{council.run_id}")
    row["tokens"] = row["input_tokens"] + row["output_tokens"]
    return answer if ok or answer else None
