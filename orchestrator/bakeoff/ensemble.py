"""Ensemble contestants: ``kind = "fanout"`` sends each trial to several models at once (one
wave, the trial folder as every leg's workspace) and, with a ``chair``, has the chair write
the one answer the hidden check grades; with ``aggregate = "vote"``, the majority of the
members' normalised answers is that answer (votes/aggregate.py). Without either there is no
one answer to grade, so the trial passes when any member's answer passes: an oracle, the
ceiling a perfect chair could reach (the report's line says which). Every trial is its own
wave on the bench's shared server, through the bench's one account (its cost ceiling); its
cost is the wave's (members and chair).
``kind = "council"`` runs one council per trial. Both are attempts the one trial skeleton
runs (bakeoff/trial.py)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from orchestrator.bakeoff.trial import Ended, keep_answer
from orchestrator.engine.record import ABORTED, COMPLETE, ERROR

Runner = Slot = Any  # orchestrator.bakeoff.run's, which calls these (no import: no cycle)


@dataclass
class Ensemble:
    """A fanout contestant's resolved members and chair."""

    members: list[Any]
    chair: Any | None = None
    kind: str = "fanout"
    rounds: int = 1  # 2 or more: each trial is a deliberation (bakeoff/deliberating.py)
    aggregate: str | None = None  # "vote": the majority of the final answers is graded

    @property
    def name(self) -> str:
        return f"{self.kind}({','.join(m.name for m in self.members)})" + (
            f"+chair {self.chair.name}" if self.chair else "+vote" if self.aggregate
            else "") + (f" ×{self.rounds} rounds" if self.rounds > 1 else "")

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
                               "bench_tier": c.tier, "workspace": str(folder),
                               **({"aggregate": c.aggregate} if c.aggregate else {})}
    # the bench's ceilings, over every trial: its account holds them; what is left now
    options.update({k: runner.account.left(k) for k, v in runner.plan.ceilings.items()
                    if v is not None})
    return WaveSpec(models=list(ensemble.members), chair=ensemble.chair,
                    briefing=runner.plan.render(slot.task),
                    runs_dir=runner.runs_dir, timeout_s=runner.plan.timeout_s,
                    max_steps=c.max_steps, kind="bench", run_id=runner.bench_id,
                    wave_id=f"{runner.bench_id}-{runner.wave_prefix}t{slot.n:04d}",
                    project_dir=os.getcwd(), workspace=folder, options=options)


@dataclass
class FanoutAttempt:
    """One fanout trial: one wave (members, then the chair) in the trial folder."""

    runner: Runner
    slot: Slot
    wave: Any = None

    def turn(self):
        return self.runner.model_limit

    async def skip(self, why: str | None) -> None:
        return None

    async def start(self, folder) -> None:
        from orchestrator.engine.wave import Wave

        runner, c = self.runner, self.slot.contestant
        spec = trial_spec(runner, self.slot, runner.resolved[c.name], folder)
        self.wave = Wave(spec, pm=runner.pms[c.name], config=runner.config,
                         ledger=runner.ledger, server=runner.server, account=runner.account)
        runner.waves.append(self.wave)
        await self.wave.run()

    def ended(self) -> Ended | None:
        return None if self.wave is None else wave_ended(self.wave,
                                                         self.slot.contestant.aggregate)


def wave_ended(wave, aggregate: str | None = None) -> Ended:
    """A fanout trial's wave as its row has it: usage, cost, status; the answers to grade
    (the chair's, the vote's with ``aggregate``, or every complete member's: any member may
    pass)."""
    records = [*wave.records, *([wave.chair.record] if wave.chair else [])]
    known = [r.cost_usd for r in records]
    cost = None if any(x is None for x in known) else sum(known)
    chair = wave.chair.record if wave.chair else None
    voted = None
    if wave.spec.chair is not None:
        answers = (chair.answer or "",) if chair is not None and chair.status == COMPLETE \
            else ()
        status = chair.status if chair is not None else ABORTED
        reason = chair.reason if chair is not None else "the chair never ran"
    elif aggregate == "vote":
        from orchestrator.votes.aggregate import answer_of, vote

        counted = vote(wave.records)
        answers = (answer_of(counted),) if answer_of(counted) else ()
        status = COMPLETE if answers else wave.status
        reason = None if answers else "no member completed: nothing to vote on"
        voted = {k: counted[k] for k in ("outcome", "answers", "of_legs", "tie_break")}
        voted["votes"] = (counted["winner"] or {}).get("votes", 0)
    else:
        answers = tuple(r.answer or "" for r in wave.records if r.status == COMPLETE)
        status = COMPLETE if answers else wave.status
        reason = None if answers else "no member completed"
    shown = answers[0] if len(answers) == 1 else "\n\n".join(
        f"--- member {i}\n{a}" for i, a in enumerate(answers, start=1))
    refused = list(wave.budget_refusals)
    return Ended(
        status=status, reason=reason, answers=answers,
        excluded=f"not launched: {refused[0]['reason']}" if refused and not answers
        else None,
        fields=dict(command=wave.wave_id, answer=keep_answer(shown), answer_chars=len(shown),
                    leg_id=(chair.leg_id if chair is not None else None),
                    **usage_of(records),
                    secs=round(max((r.duration_s or 0.0) for r in records)
                               if records else 0.0, 3),
                    cost_usd=cost, cost_source="ensemble" if cost is not None else "unknown",
                    wave_id=wave.wave_id, **({"vote": voted} if voted else {})))


def usage_of(records: list[Any]) -> dict[str, int]:
    """The tokens and steps of several legs, summed as one trial's."""
    out = {k: sum(getattr(r.usage, k) for r in records)
           for k in ("input_tokens", "output_tokens", "cached_tokens")}
    return {**out, "tokens": out["input_tokens"] + out["output_tokens"],
            "steps": sum(r.steps for r in records)}


@dataclass
class CouncilAttempt:
    """One council trial: one ``orch council`` run over the trial folder (reviews, judging,
    tally, chair) on the bench's shared server. The graded answer is the council's findings,
    most agreed first (``LOCATION: [tier] claim``, one a line), then the chair's synthesis:
    a check that reads locations (the ``review`` suite) sees what the council stands behind
    first."""

    runner: Runner
    slot: Slot
    council: Any = None
    doc: dict[str, Any] | None = None

    def turn(self):
        return self.runner.model_limit

    async def skip(self, why: str | None) -> None:
        return None

    async def start(self, folder) -> None:
        from orchestrator.council.preflight import Plan as CouncilPlan
        from orchestrator.council.run import CouncilRun

        runner, slot = self.runner, self.slot
        c = slot.contestant
        ensemble: Ensemble = runner.resolved[c.name]
        options: dict[str, Any] = {"plugins": True, "tools": c.tools, "workspace": str(folder)}
        options.update({k: runner.account.left(k)  # what the bench has left now
                        for k, v in runner.plan.ceilings.items() if v is not None})
        plan = CouncilPlan(seats=list(ensemble.members), chair=ensemble.chair,
                           briefing=runner.plan.render(slot.task))
        self.council = CouncilRun(plan, pm=runner.pms[c.name], config=runner.config,
                                  runs_dir=runner.runs_dir, timeout_s=runner.plan.timeout_s,
                                  max_steps=c.max_steps, project_dir=os.getcwd(),
                                  workspace=folder, options=options,
                                  account=runner.account,
                                  run_id=f"{runner.bench_id}-{runner.wave_prefix}"
                                         f"t{slot.n:04d}")
        self.council.server = runner.server
        runner.waves.append(self.council)  # an interrupt stops it as it stops a wave
        started = time.monotonic()
        doc = await self.council.run()
        self.doc = {**doc, "bench_secs": time.monotonic() - started}

    def ended(self) -> Ended | None:
        if self.doc is None:
            return None
        return council_ended(self.council, self.doc)


def council_ended(council, doc: dict[str, Any]) -> Ended:
    """The council's usage, cost and status; its answer to grade, when it ended with one."""
    groups = (council.tally or {}).get("groups") or []
    findings = "\n".join(f"{g.get('location') or '?'}: [{g.get('tier')}] {g.get('claim', '')}"
                         for g in groups)
    synthesis = council.chair.synthesis or ""
    answer = (findings + ("\n\n" + synthesis if synthesis else "")).strip()
    ok = doc.get("status") in ("complete", "degraded")
    status, reason = (COMPLETE, None) if ok and answer else (
        ERROR, "the council ended without findings or a synthesis" if ok
        else (doc.get("error") or doc.get("status")))
    return Ended(
        status=status, reason=reason, answers=(answer,) if status == COMPLETE else (),
        fields=dict(command=f"council-{council.run_id}", answer=keep_answer(answer),
                    answer_chars=len(answer), **usage_of(council.records),
                    secs=round(float(doc.get("bench_secs") or 0.0), 3),
                    cost_usd=doc.get("cost_usd"),
                    cost_source="council" if doc.get("cost_usd") is not None else "unknown",
                    wave_id=f"council-{council.run_id}"))
