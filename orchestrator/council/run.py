"""A council run: reviews → anonymised cross-review → tally → chair, each stage a wave on one
shared server, every call in the spend ledger under the run id, every artifact on disk.

Exit codes: 0 every stage complete with a verdict; 2 degraded (a seat lost, judges short, no
verdict); 1 quorum (fewer than 2 usable reviews) or an internal error; 128+signal when
interrupted — ``run.json`` is written in every case.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio

from orchestrator import __version__, jobscope, run_ceiling
from orchestrator.account import Account
from orchestrator.chair.marks import CUT, marks_of
from orchestrator.config import Config
from orchestrator.council.artifacts import Artifacts
from orchestrator.council.bundle import Bundle, build_bundle
from orchestrator.council.chair import ChairOutcome, chair_packet, walk
from orchestrator.council.findings import Review, repair_briefing, seat_briefing
from orchestrator.council.judging import (
    JUDGE_BRIEF,
    QUOTING,
    Judgement,
    judge_briefing,
    parse_judgement,
)
from orchestrator.council.preflight import Plan
from orchestrator.council.report import report_markdown
from orchestrator.council.report_html import report_html
from orchestrator.council.tally import CONCURRENCE_LINE, tally
from orchestrator.engine.ledger_sink import LedgerSink
from orchestrator.engine.record import ABORTED, COMPLETE, REFUSED, LegRecord, now_iso
from orchestrator.engine.wave import Wave, WaveSpec, new_wave_id
from orchestrator.errors import OrchError, PreflightError
from orchestrator.events import NoSink, Sink, StageEnded, StageStarted
from orchestrator.intake import Anonymity
from orchestrator.models.addressing import ResolvedModel, check_key
from orchestrator.models.addressing import resolve as resolve_model
from orchestrator.models.server import Server
from orchestrator.pids import process_started
from orchestrator.request import Usage
from orchestrator.security.secrets import scrub

QUORUM = 2
# the keys each stage's wave options carry: which council run, which stage (orchestrator.modes
# reads them for plugins)
RUN_KEY, STAGE_KEY = "council_run", "council_stage"
COVERAGE = 0.8  # a judge that voted on fewer of the findings it was shown is short


class Interrupted(Exception):
    """A signal arrived: no further stage starts."""


class Quorum(Exception):
    """Fewer than two usable reviews: there is nothing to cross-review."""


def failure(rec: LegRecord) -> str | None:
    """Why a leg gave nothing usable, or None when it answered."""
    if rec.status != COMPLETE:
        return rec.reason or rec.status
    if not (rec.answer or "").strip():
        return "empty answer"
    return None


def retryable(rec: LegRecord) -> bool:
    """A leg that died is worth one retry; one a guard refused (nothing was sent, and the
    same check would refuse it again) or a signal aborted is not."""
    return failure(rec) is not None and rec.status not in (REFUSED, ABORTED)


class CouncilRun:
    def __init__(self, plan: Plan, *, pm, config: Config, runs_dir: Path,
                 timeout_s: float = 600.0, max_steps: int = 20, tag: str | None = None,
                 project_dir: str | None = None, workspace: Path | None = None,
                 observe=None, run_id: str | None = None, ledger_url: str | None = None,
                 resolve=None, options: dict[str, Any] | None = None,
                 events: Sink | None = None, account: Account | None = None) -> None:
        self.plan, self.pm, self.config = plan, pm, config
        self.run_id = run_id or new_wave_id()
        self.dir = runs_dir / f"council-{self.run_id}"
        self.timeout_s, self.max_steps, self.tag = timeout_s, max_steps, tag
        self.project_dir, self.workspace, self.observe = project_dir, workspace, observe
        self.events = events or NoSink()  # stages as they start and end (orchestrator.events)
        self.ledger_url = ledger_url
        # tools, workspace and budgets for every stage; a run ceiling (a plugin's option, the
        # cost_ceiling plugin's) bounds the whole run: each stage gets what the run has left
        self.options = dict(options or {})
        self.ceiling_keys = run_ceiling.keys(pm, "council_run")
        self.ceilings = {key: self.options.pop(key) for key in self.ceiling_keys
                         if key in self.options}
        # the run's one account, every stage's (a bench's, when a trial is a council): a new
        # run id, so the record holds nothing for it yet
        self.account = account if account is not None else \
            Account(run_id=self.run_id, ceilings=self.ceilings)
        # name -> ResolvedModel, for promoting a chair from stats (the CLI passes plugins')
        self.resolve = resolve or (lambda name: resolve_model(name, config))
        self.server = Server(timeout_s=timeout_s)  # one gate and one set of counters per run
        self.spend = LedgerSink(ledger_url)
        self.art = Artifacts(self.dir)
        self.stages: list[dict[str, Any]] = []
        self.records: list[LegRecord] = []
        self.notices: list[str] = []
        self.degraded: list[str] = []
        self.reviews: list[Review] = [Review(m.name) for m in plan.seats]
        self.bundle: Bundle | None = None
        self.judgements: list[Judgement] = []
        self.shown: dict[str, list[str]] = {}  # judge -> the finding ids its view showed, in order
        self.tally: dict[str, Any] | None = None
        self.chair = ChairOutcome()
        self.anonymity: dict[str, Any] = {}
        self.status, self.error = "running", None
        self.signum: int | None = None
        self._current: Wave | None = None
        self._created = now_iso()
        self.usage_error = False  # a pre-flight refusal: exit 2, like a usage error
        for text in plan.notices:  # pre-flight's, e.g. a chair sharing a seat's weights
            self.notice(text)

    # -- plumbing ----------------------------------------------------------------------------
    def notice(self, text: str, degrade: str | None = None) -> None:
        text = scrub(text)
        if text not in self.notices:
            self.notices.append(text)
        if degrade and degrade not in self.degraded:
            self.degraded.append(degrade)

    def _check(self) -> None:
        if self.signum is not None:
            raise Interrupted

    async def stage(self, name: str, models: list[ResolvedModel], briefings: list[str],
                    kind: str, anonymity: Anonymity | None = None) -> list[LegRecord]:
        """One stage as one wave on the shared server; its legs go to the spend ledger."""
        self._check()
        self._progress(name)
        options = {**self.options, RUN_KEY: self.run_id, STAGE_KEY: name}
        for key, ceiling in self.ceilings.items():  # the wave's: what the run has left
            if ceiling is not None:
                left = self.account.left(key)  # the run's account, else this run's own
                options[key] = left if left is not None else run_ceiling.left(ceiling, sum(
                    r.cost_bound_usd if r.cost_bound_usd is not None else r.cost_usd or 0.0
                    for r in self.records))
        spec = WaveSpec(models=models, briefing=self.plan.briefing, briefings=briefings,
                        runs_dir=self.dir / "waves", timeout_s=self.timeout_s,
                        max_steps=self.max_steps, kind=kind, run_id=self.run_id,
                        wave_id=f"{self.run_id}-{name}", tag=self.tag,
                        project_dir=self.project_dir, workspace=self.workspace,
                        options=options, later=[self.plan.chair], anonymity=anonymity)
        wave = Wave(spec, pm=self.pm, config=self.config, ledger=self.spend, account=self.account,
                    observe=self.observe, server=self.server)
        self._current = wave
        self.events.emit(StageStarted(name, kind, [m.name for m in models]))
        try:
            doc = await wave.run()
        finally:
            self._current = None
        self.events.emit(StageEnded(name, doc["status"], doc["cost_usd"]))
        self.records += wave.records
        self.stages.append({"name": name, "kind": kind, "wave_id": wave.wave_id,
                            "status": doc["status"], "legs": [r.leg_id for r in wave.records],
                            "usage": doc["usage"], "cost_usd": doc["cost_usd"],
                            "cost_exact": doc["cost_exact"]})
        for note in doc.get("notices") or []:
            self.notice(f"stage {name}: {note}")
        for reason in doc.get("degraded") or []:  # budgets: never a clean run
            self.notice(f"stage {name}: {reason}", "cost inexact under a ceiling"
                        if reason.startswith("cost ceiling") else "budget")
        return wave.records

    def _progress(self, stage: str) -> None:
        """``run.json`` still ``running`` as ``stage`` begins, with what the stages before it
        gave (the seats' reviews read, the judgements): what `orch status` and `orch ui`
        show of a run still going (the stage at work is read from its wave). A failed write
        is a notice: the run's end writes the file again."""
        try:
            self.write_run()
        except (OSError, ValueError, TypeError) as exc:
            self.notice(f"run.json could not be written after stage {stage} "
                        f"({type(exc).__name__}: {exc})")

    async def _watch_signals(self) -> None:
        # the process's signals, or its job's (serve)
        await jobscope.watch(self.interrupt, lambda: self.signum is not None)

    def interrupt(self, signum: int) -> None:
        """Stop as a signal would: no further stage starts, the current wave's legs abort
        (`orch mcp` calls this when its client cancels)."""
        self.signum = signum
        if self._current is not None:
            self._current.interrupt(signum)

    # -- the pipeline ------------------------------------------------------------------------
    async def run(self, *, handle_signals: bool = False) -> dict[str, Any]:
        self.art.text("briefing.md", self.plan.briefing)
        self.write_run()
        jobscope.run_started(self.run_id)  # a daemon's client names it if the daemon dies
        async with anyio.create_task_group() as tg:
            if handle_signals:
                tg.start_soon(self._watch_signals)
            await self._guarded()
            tg.cancel_scope.cancel()
        return self.finish()

    async def _guarded(self) -> None:
        try:
            await self._reviews()
            await self._judging()
            self._tally()
            await self._chair()
            self._check()
            self.status = "degraded" if self.degraded else "complete"
        except Interrupted:
            self.status = "aborted"
            self._interrupted_reviews()
        except Quorum as exc:
            self.status, self.error = "quorum", f"COUNCIL_QUORUM: {exc}"
        except PreflightError as exc:  # options a seat or the chair cannot take: none sent
            self.status, self.error, self.usage_error = "error", str(exc), True
        except OrchError as exc:  # said and meant (a stage's wave_start: the local server
            self.status, self.error = "error", scrub(str(exc))  # cannot start): one line
        except Exception as exc:  # a bug: still leave run.json saying so
            from orchestrator.runtime import log

            log().exception("council_failed", run_id=self.run_id)
            self.status, self.error = "error", scrub(f"internal: {type(exc).__name__}: {exc}")

    async def _retrying(self, name: str, models: list[ResolvedModel], briefings: list[str],
                        kind: str, anonymity: Anonymity | None = None
                        ) -> list[list[LegRecord]]:
        """A stage, and one retry for the legs that died: each model's legs, last one final."""
        legs = [[rec] for rec in await self.stage(name, models, briefings, kind, anonymity)]
        self._check()
        dead = [i for i, tries in enumerate(legs) if retryable(tries[0])]
        if dead:
            again = await self.stage(f"{name}-retry", [models[i] for i in dead],
                                     [briefings[i] for i in dead], kind, anonymity)
            for i, rec in zip(dead, again, strict=True):
                legs[i].append(rec)
            self._check()
        return legs

    async def _reviews(self) -> None:
        seats = self.plan.seats
        brief = seat_briefing(self.plan.briefing)
        tries = await self._retrying("review", seats, [brief] * len(seats), "seat")
        for review, legs in zip(self.reviews, tries, strict=True):
            review.legs = [rec.leg_id for rec in legs]
            review.retried = len(legs) > 1
            rec = legs[-1]
            why = failure(rec)
            if why:
                review.reason = why
                self.notice(f"seat {review.model} did not review — {why}", "seat lost")
                continue
            review.read(rec.answer, rec.finish_reason)
            review.marks = marks_of(rec)  # the marks every chair reads: CUT, UNFINISHED
            review.cut = review.cut or CUT in review.marks
            if review.cut:
                self.notice(f"seat {review.model}'s review is CUT: it stopped at its output "
                            "limit")
        usable = [r for r in self.reviews if r.usable]
        if len(usable) < QUORUM:
            raise Quorum(f"only {len(usable)} of {len(seats)} seats reviewed; a council needs "
                         f"at least {QUORUM} reviews to cross-review (see the notices)")
        broken = [r for r in usable if not r.conformed]
        if broken:
            by_name = {m.name: m for m in seats}
            recs = await self.stage("repair", [by_name[r.model] for r in broken],
                                    [repair_briefing(r.answer, r.problem or "") for r in broken],
                                    "seat")
            self._check()
            for review, rec in zip(broken, recs, strict=True):
                review.reprompted = True
                review.legs.append(rec.leg_id)
                if failure(rec) or not review.take_repair(rec.answer):
                    self.notice(f"seat {review.model} gave no readable findings block "
                                f"({review.problem}); its prose is kept and it counts as "
                                "non-conforming")

    def _interrupted_reviews(self) -> None:
        """A signal before the reviews were read leaves each seat's own words: its leg's
        status and reason, and what it was billed (an answer paid for but never read)."""
        for review in self.reviews:
            if review.usable or review.reason:
                continue
            legs = [r for r in self.records if r.kind == "seat" and r.model == review.model]
            if not legs:
                review.reason = "the run was interrupted before its review began"
                continue
            rec = legs[-1]
            review.legs = review.legs or [r.leg_id for r in legs]
            why = f"the run was interrupted: its leg ended {rec.status}"
            why += f" ({rec.reason})" if rec.reason else ""
            if rec.billed:
                cost = "cost unknown" if rec.cost_usd is None else f"${rec.cost_usd:.4f}"
                why += f"; its answer was billed ({cost}) and not read"
            review.reason = why

    async def _judging(self) -> None:
        judges = [m for m, r in zip(self.plan.seats, self.reviews, strict=True) if r.usable]
        self.bundle = bundle = build_bundle(self.run_id, self.reviews, self.plan.seats)
        views = {m.name: bundle.view_for(m.name) for m in judges}
        self.shown = {name: ids for name, (_, ids, _) in views.items()}
        prompts = [judge_briefing(self.plan.briefing, *views[m.name], nonce=bundle.nonce)
                   for m in judges]
        # what each judge reads of the seats, as it is in the prompt sent
        marker = f"## The reviews [{bundle.nonce}]"
        leaked = bundle.scan({"bundle": bundle.markdown(),
                              **{f"prompt of judge {m.name}": p.split(marker, 1)[-1]
                                 for m, p in zip(judges, prompts, strict=True)}})
        self.anonymity = {"terms": len(bundle.terms), "checked": 1 + len(views),
                          "redacted": bundle.redacted, "leaks": leaked}
        if leaked:
            raise RuntimeError(f"an anonymised view still names a seat: {leaked}")
        # and at the wire, every request a judge sends (its retries, its steps after a tool
        # call): the same folded terms, the user's own briefing and orch's brief exempt
        anonymity = Anonymity(tuple(bundle.terms), exempt=(
            self.plan.briefing.strip(), JUDGE_BRIEF, QUOTING.format(nonce=bundle.nonce)))
        tries = await self._retrying("judge", judges, prompts, "judge", anonymity)
        self._wire_record(tries)
        for m, prompt, legs in zip(judges, prompts, tries, strict=True):
            rec = legs[-1]
            why = failure(rec)
            _, ids, labels = views[m.name]
            if why:
                j = Judgement(m.name, problem=f"did not judge — {why}")
                self.notice(f"judge {m.name} did not judge — {why}", "judges short")
            else:
                j = parse_judgement(m.name, rec.answer, ids, labels)
                if not j.usable:
                    self.notice(f"judge {m.name}'s judgement could not be read ({j.problem}); "
                                "its votes are not counted", "judges short")
                elif ids and len(j.votes) < COVERAGE * len(ids):
                    self.notice(f"judge {m.name} is short: it voted on {len(j.votes)} of the "
                                f"{len(ids)} findings it was shown (under "
                                f"{COVERAGE:.0%}); its missing votes count as neutral",
                                "judges short")
            self.judgements.append(j)
            n = self.plan.seats.index(m) + 1
            self.art.judgement(n, m.name, prompt, rec.answer, {**j.to_dict(),
                                                              "leg_id": rec.leg_id})

    def _wire_record(self, tries: list[list[LegRecord]]) -> None:
        """What the intake did at the wire to the judges' requests, on ``run.json``: the
        spellings it redacted, and a request it stopped (its leg refused, nothing sent)."""
        legs = [rec for recs in tries for rec in recs]
        stopped = {rec.leg_id: rec.extra["anonymity_leaks"] for rec in legs
                   if rec.extra.get("anonymity_leaks")}
        self.anonymity["redacted_at_wire"] = sum(int(rec.extra.get("anonymity_redacted") or 0)
                                                 for rec in legs)
        self.anonymity["stopped"] = stopped
        if stopped:
            self.anonymity["leaks"] = {**self.anonymity.get("leaks", {}),
                                       **{f"request of {leg}": found
                                          for leg, found in stopped.items()}}

    def _tally(self) -> None:
        bundle = self.bundle
        seat_of = bundle.seat_of_label
        findings = [{"id": f["id"], "seat": r.model, "severity": f["severity"],
                     "claim": f["claim"], "location": f["location"]}
                    for r in self.reviews if r.usable for f in r.findings]
        votes = [v for j in self.judgements if j.usable for v in j.votes]
        rankings = {j.judge: [seat_of[label] for label in j.ranking]
                    for j in self.judgements if j.usable}
        seats = [r.model for r in self.reviews if r.usable]
        self.tally = tally(seats, findings, votes, rankings,
                           judges=[j.judge for j in self.judgements if j.usable])

    async def _chair(self) -> None:
        packet = chair_packet(self.plan.briefing, self.reviews, self.bundle.labels, self.tally,
                              self.notices, nonce=self.bundle.nonce)
        self.art.text("chair-packet.md", packet)

        async def attempt(model, briefing, name, kind):
            return (await self.stage(name, [model], [briefing], kind))[0]

        await walk(self.plan.chair, packet, attempt, self._promote,
                   lambda: self.signum is not None, out=self.chair)
        if self.chair.synthesis:
            self.art.text("chair-output.md", self.chair.synthesis)
        if self.chair.verdict is None and self.signum is None:
            self.notice("the council has no verdict (see chair_attempts)", "no verdict")

    async def _promote(self) -> ResolvedModel | None:
        """The non-seat model with the best street-cred in council stats that resolves and has
        its key."""
        from orchestrator.ledger.council_rows import CouncilLedger

        exclude = {s.base_name for s in self.plan.seats} | {self.plan.chair.base_name}
        try:
            names = await self.spend.bounded_async(  # within the run's ledger deadline
                lambda: CouncilLedger(self.ledger_url).best_street_cred(exclude), "answer")
        except Exception as exc:  # an unreadable ledger must not cost the run its chair
            self.notice(f"council stats unavailable for promotion: {exc}")
            names = []
        for name in names:
            try:
                model = self.resolve(name)
                if model.base_name in exclude:
                    continue
                check_key(model)
            except OrchError:
                continue
            self.notice(f"chair {self.plan.chair.name} failed twice; promoted {model.name} "
                        "(best street-cred in council stats among non-seats)")
            return model
        self.notice(f"chair {self.plan.chair.name} failed twice and no non-seat model in "
                    "council stats could be promoted")
        return None

    # -- the end -----------------------------------------------------------------------------
    @property
    def exit_code(self) -> int:
        if self.status == "aborted":
            return 128 + (self.signum or signal.SIGINT)
        if self.usage_error:
            return PreflightError.exit_code
        return {"complete": 0, "degraded": 2}.get(self.status, 1)

    def finish(self) -> dict[str, Any]:
        from orchestrator.council import summary

        for n, review in enumerate(self.reviews, start=1):
            if review.legs:
                self.art.review(n, review.model, review.answer, review.to_dict())
        if self.bundle is not None:
            self.art.json("bundle.json", self.bundle.to_dict())
            self.art.text("bundle.md", self.bundle.markdown())
        if self.tally is not None:
            self.art.json("tally.json", self.tally)
        if self.status not in ("aborted", "running", "error"):
            summary.council_rows(self)
        self.art.json("verdict.json", summary.verdict_doc(self))
        doc = self.document()
        self.art.text("report.md", report_markdown(doc, self.tally, self.chair.synthesis))
        self.art.text("report.html", report_html(doc, self.tally, self.chair.synthesis))
        return self.write_run()

    def document(self) -> dict[str, Any]:
        from orchestrator.council import summary

        everything = self.records
        known = [r.cost_usd for r in everything if r.cost_usd is not None]
        return {
            "run_id": self.run_id, "kind": "council", "status": self.status,
            "exit_code": None if self.status == "running" else self.exit_code, "error": self.error, "signal": self.signum,
            "created_at": self._created,
            "ended_at": None if self.status == "running" else now_iso(),
            "orch_version": __version__, "pid": os.getpid(), "pid_started": process_started(os.getpid()),
            "client_pid": jobscope.client_pid(),
            "dir": str(self.dir), "briefing": "briefing.md", "context": self.plan.context,
            "line": CONCURRENCE_LINE,
            "seats": summary.seat_entries(self),
            "judges": [j.to_dict() | {"votes": len(j.votes)} for j in self.judgements],
            "tiers": self.tally["tiers"] if self.tally else None,
            "verdict": self.chair.verdict,
            "chair": {"model": self.chair.model, "requested": self.plan.chair.name,
                      "promoted": self.chair.promoted, "verdict": self.chair.verdict},
            "chair_attempts": self.chair.attempts,
            "stages": self.stages,
            "usage": sum((r.usage for r in everything), Usage()).to_dict(),
            "cost_usd": round(sum(known), 8), "cost_exact": len(known) == len(everything),
            "requests": self.server.sent,
            "notices": self.notices, "degraded": self.degraded,
            "anonymity": self.anonymity, "ledger_errors": self.spend.errors,
            **{key: self.ceilings.get(key) for key in self.ceiling_keys},
            "options": self.options,
            "artifacts": sorted({*self.art.written, "run.json"}),
            "tag": self.tag,
        }

    def write_run(self) -> dict[str, Any]:
        doc = self.document()
        self.art.json("run.json", doc)
        return doc

