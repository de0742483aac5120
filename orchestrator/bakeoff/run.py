"""Running a bench: every trial in a fresh folder, graded by the hidden check.

Every trial, whatever its contestant's kind, runs through the one skeleton of
``bakeoff/trial.py`` (where an error is a failure by construction); this module schedules
them and holds what they share. Model trials are one-leg waves on ONE shared server (one rate
gate, one ledger sink), with the trial folder as the workspace and ``kind="bench"``,
``run_id`` = the bench id. Every trial spends through the bench's one account
(orchestrator/account; a resume's is opened from the ledger), so a run ceiling (the
cost_ceiling plugin's) bounds the whole bench and its resumes, not each trial; a launch only
the others' open claims keep out waits for them to settle. Command trials run as
subprocesses in worker threads, one at a time per contestant unless it says
``jobs = N``. A trial whose set-up failed (or that the ceiling never launched) is excluded
and listed, never counted as a failure.

A signal (Ctrl-C, SIGTERM, or a daemon job's interrupt) stops the bench as it stops a wave:
running legs abort, command contestants' process groups are killed, no new trial starts, and
every trial graded so far is kept. Trials cut short are listed as excluded ``interrupted``
rows; the CLI writes the partial results file (see ``cli/bench_run.py``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from orchestrator import jobscope
from orchestrator.account import Account
from orchestrator.bakeoff import contestants as cmd
from orchestrator.bakeoff import trial
from orchestrator.bakeoff.guard import Guard
from orchestrator.bakeoff.plan import Plan
from orchestrator.bakeoff.tasks import (
    Snapshot,
    Task,
    make_folder,
    materialize,
    remove_folder,
    slug,
    snapshot,
    start_key,
)
from orchestrator.bakeoff.trial import Ended, keep_answer
from orchestrator.engine.record import ABORTED, COMPLETE, PENDING
from orchestrator.engine.wave import Wave, WaveSpec, new_wave_id
from orchestrator.hookspecs import hookimpl
from orchestrator.security.secrets import scrub

# the kind of a model contestant's trial legs (orchestrator.modes.bench_trial reads it)
TRIAL_KIND = "bench"


def new_bench_id() -> str:
    """Sortable by time, and as collision-proof as a wave id (64 random bits)."""
    return "bench-" + new_wave_id()


class TierPin:
    """A contestant's ``tier`` wins over the tiers plugin's choice (runs after it)."""

    @hookimpl
    def leg_start(self, leg):
        tier = leg.options.get("bench_tier")
        if tier:
            leg.tier = tier
            leg.set("tier", tier)
            leg.set("tier_source", "bench")


class BenchWave(Wave):
    """A model contestant's wave: each leg launches through the runner, which gives it its
    trial folder as workspace just before the launch and grades it after."""

    runner: Runner
    slot_of: dict[str, Slot]

    async def _launch(self, leg) -> None:
        await self.runner.model_trial(self, leg, self.slot_of[leg.ctx.leg_id])


@dataclass
class Slot:
    n: int
    task: Task
    contestant: cmd.Contestant
    trial: int


def numbered(plan: Plan) -> list[Slot]:
    """Every trial of the plan, numbered task → contestant → trial (a results file's ``n``)."""
    out, n = [], 0
    for task in plan.tasks:
        for c in plan.contestants:
            for k in range(1, plan.trials + 1):
                n += 1
                out.append(Slot(n, task, c, k))
    return out


@dataclass
class Runner:
    plan: Plan
    bench_id: str
    config: Any
    pms: dict[str, Any] = field(default_factory=dict)  # model contestant -> plugin manager
    resolved: dict[str, Any] = field(default_factory=dict)  # model contestant -> model
    ledger: Any = None  # a LedgerSink
    runs_dir: Path | None = None
    on_trial: Callable[[dict[str, Any]], None] = lambda row: None
    results: list[dict[str, Any]] = field(default_factory=list)
    guard: Guard = field(default_factory=lambda: Guard(bwrap=None))  # set by the CLI
    stop_reason: str | None = None  # why it stopped early when no signal did (--maxfail)
    wave_prefix: str = ""  # "" for a first run; "r1-", ... for a resume's waves
    wanted: set[int] | None = None  # the slots to run (a resume); None: all
    # the bench's one account (every trial's; a resume's opened from the ledger: what the
    # killed runs spent and left in flight); None: a new bench, nothing held yet
    account: Account | None = None

    def slots(self) -> list[Slot]:
        """task → contestant → trial (the numbering is the plan's, a resume runs a subset)."""
        return [s for s in numbered(self.plan) if self.wanted is None or s.n in self.wanted]

    keep_answer = staticmethod(keep_answer)  # what a row keeps of an answer (the start)

    def stop(self, reason: str) -> None:
        """Stop as an interrupt does, for a reason of the bench's own (--maxfail)."""
        if self.signum is None:
            self.stop_reason = reason
            self.interrupt(0)

    async def run(self, *, handle_signals: bool = False) -> list[dict[str, Any]]:
        from orchestrator.models.server import Server

        slots = self.slots()
        self.server = Server(timeout_s=self.plan.timeout_s)
        self.server.wave_size = self.plan.jobs
        if self.account is None:  # a new bench id: the record holds nothing for it
            self.account = Account(run_id=self.bench_id, ceilings=self.plan.ceilings,
                                   waits=True)
        self.model_limit = anyio.CapacityLimiter(self.plan.jobs)
        self.command_limits = {c.name: anyio.CapacityLimiter(c.jobs)
                               for c in self.plan.contestants if c.kind == "command"}
        self.templates: dict[Any, Snapshot | BaseException] = {}  # start-state key -> state
        self.signum: int | None = None
        self.waves: list[BenchWave] = []
        self.commands = self.guard.running  # commands and checks, killed on an interrupt
        self._scopes: list[anyio.CancelScope] = []  # set-up and command trials
        self.rows: dict[int, dict[str, Any]] = {}
        jobscope.run_started(self.bench_id)  # a daemon's client names the bench if it dies
        try:
            async with anyio.create_task_group() as outer:
                if handle_signals:  # the process's signals, or its job's (serve)
                    await outer.start(partial(jobscope.watch, self.interrupt,
                                              lambda: self.signum is not None))
                with self._scope():
                    await self.prepare_all()
                if self.signum is None:
                    await self._trials(slots)
                outer.cancel_scope.cancel()
        finally:
            self.templates.clear()
        self.results = [self.rows[n] for n in sorted(self.rows)]
        return self.results

    async def _trials(self, slots: list[Slot]) -> None:
        # model trials take the limiter in slot order (task → contestant → trial) although
        # each contestant's trials are the legs of its own wave
        model_slots = [s.n for s in slots if s.contestant.kind == "model"]
        self.turns = {n: anyio.Event() for n in model_slots}
        self.after = dict(zip(model_slots[1:], model_slots, strict=False))
        async with anyio.create_task_group() as tg:
            for j, c in enumerate(self.plan.contestants, start=1):
                if c.kind == "model":
                    self.waves.append(self.wave(j, c, [s for s in slots if s.contestant is c]))
                    tg.start_soon(self.waves[-1].run)
            tg.start_soon(self._command_trials, [s for s in slots
                                                 if s.contestant.kind == "command"])
            tg.start_soon(self._ensemble_trials, [s for s in slots if s.contestant.kind
                                                  in ("fanout", "council")])

    async def _command_trials(self, slots: list[Slot]) -> None:
        with self._scope():
            async with anyio.create_task_group() as tg:
                for slot in slots:
                    tg.start_soon(self.command_trial, slot)

    async def _ensemble_trials(self, slots: list[Slot]) -> None:
        from orchestrator.bakeoff.deliberating import DeliberationAttempt
        from orchestrator.bakeoff.ensemble import CouncilAttempt, FanoutAttempt

        # no cancel scope of the runner's: an interrupt stops each wave or council (it
        # finishes its own files), and a trial not yet begun sees ``signum`` and never starts
        async with anyio.create_task_group() as tg:
            for slot in slots:
                c = slot.contestant
                kind = DeliberationAttempt if c.deliberates else FanoutAttempt \
                    if c.kind == "fanout" else CouncilAttempt
                tg.start_soon(trial.run, self, slot, kind(self, slot))

    def _scope(self) -> anyio.CancelScope:
        """A cancel scope an interrupt cancels (one made after the interrupt starts
        cancelled)."""
        scope = anyio.CancelScope()
        if self.signum is not None:
            scope.cancel()
        self._scopes.append(scope)
        return scope

    def interrupt(self, signum: int) -> None:
        """Stop as a signal would: legs abort (each wave finalises its wave.json), command
        contestants are killed, and no further trial starts."""
        self.signum = signum
        for scope in self._scopes:
            scope.cancel()
        for wave in self.waves:
            wave.interrupt(signum)
        self.commands.stop()

    def wave(self, j: int, c: cmd.Contestant, slots: list[Slot]):
        """One model contestant's trials as the legs of one wave on the shared server."""
        options: dict[str, Any] = {"plugins": True, "tools": c.tools, "bench_tier": c.tier}
        options.update({k: self.account.left(k) for k, v in self.plan.ceilings.items()
                        if v is not None})  # what the bench has left (its account holds it)
        spec = WaveSpec(models=[self.resolved[c.name]] * len(slots), briefing=self.plan.prompt,
                        briefings=[self.plan.render(s.task) for s in slots],
                        runs_dir=self.runs_dir, timeout_s=self.plan.timeout_s,
                        max_steps=c.max_steps, kind=TRIAL_KIND, run_id=self.bench_id,
                        wave_id=f"{self.bench_id}-{self.wave_prefix}{j}", project_dir=os.getcwd(),
                        options=options)
        wave = BenchWave(spec, pm=self.pms[c.name], config=self.config, ledger=self.ledger,
                         server=self.server, account=self.account)
        wave.runner, wave.slot_of = self, {leg.ctx.leg_id: s
                                           for leg, s in zip(wave.legs, slots, strict=True)}
        return wave

    async def model_trial(self, wave, leg, slot: Slot) -> None:
        """One leg in its own fresh folder (in slot order, ``jobs`` at a time), graded."""
        await trial.run(self, slot, ModelAttempt(self, wave, leg, slot))

    async def command_trial(self, slot: Slot) -> None:
        from orchestrator.bakeoff.command import CommandAttempt

        await trial.run(self, slot, CommandAttempt(self, slot))

    def interrupted_by(self) -> str:
        """Why trials were cut short: ``SIGINT arrived``, or the bench's own reason."""
        import signal

        name = signal.Signals(self.signum).name if self.signum else "an interrupt"
        return self.stop_reason or f"{name} arrived"

    async def folder(self, task: Task, row: dict[str, Any]) -> Path | None:
        """A fresh trial folder; None, with the trial excluded and why, if set-up failed."""
        try:
            state = await self.template(task)
            return await anyio.to_thread.run_sync(materialize, state,
                                                  f"orch-bench-{slug(task.id)}-")
        except Exception as exc:
            row["excluded"] = scrub(f"set-up failed: {type(exc).__name__}: {exc}")[:500]
            return None

    async def finish(self, slot: Slot, folder: Path | None,
                     row: dict[str, Any] | None) -> None:
        """Remove the folder (in a thread: it overlaps other trials' waits), then keep and
        report ``row`` (None: nothing to keep, the trial never started or crashed)."""
        if folder is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_folder, folder)
        if row is not None:
            self.rows[slot.n] = row
            self.on_trial(row)

    def base_row(self, slot: Slot) -> dict[str, Any]:
        return trial.base_row(slot.n, slot.task.id, slot.contestant.name,
                              slot.contestant.kind, slot.trial)

    async def prepare_all(self) -> None:
        """Every distinct start state (files + repository), made in parallel worker threads
        before the first launch, so trials launch together instead of behind git. Tasks
        with the same files share one (a suite's tasks often start from the same code
        base). A failure is kept, so every trial of those tasks is excluded with the same
        reason."""
        async def make(key: Any, task: Task) -> None:
            try:
                self.templates[key] = await anyio.to_thread.run_sync(_prepare, task)
            except Exception as exc:
                self.templates[key] = exc

        distinct: dict[Any, Task] = {}
        for task in self.plan.tasks:
            distinct.setdefault(start_key(task), task)
        async with anyio.create_task_group() as tg:
            for key, task in distinct.items():
                tg.start_soon(make, key, task)

    async def template(self, task: Task) -> Snapshot:
        """The task's start state, held in memory; each trial writes a fresh copy."""
        made = self.templates[start_key(task)]
        if isinstance(made, BaseException):
            raise made
        return made


@dataclass
class ModelAttempt:
    """A model contestant's attempt: one leg of its contestant's wave, launched in the
    trial folder when its turn comes (slot order, ``jobs`` at a time)."""

    runner: Runner
    wave: BenchWave
    leg: Any
    slot: Slot

    @contextlib.asynccontextmanager
    async def turn(self):
        runner, n = self.runner, self.slot.n
        if n in runner.after:
            await runner.turns[runner.after[n]].wait()
        async with runner.model_limit:
            runner.turns[n].set()
            yield

    async def start(self, folder: Path) -> None:
        leg = self.leg
        leg.ctx.workspace = folder
        leg.ctx.options = {**leg.ctx.options, "workspace": str(folder)}
        await Wave._launch(self.wave, leg)

    async def skip(self, why: str | None) -> None:
        """Set-up failed: the leg ends refused, with its row and files; interrupted before
        it began: wave.json says aborted."""
        if why is not None:
            await self.leg.refuse(why)
        elif self.leg.record.status == PENDING:
            self.leg.record.finish(ABORTED, "aborted: the bench was interrupted before "
                                   "this trial started")

    def ended(self) -> Ended | None:
        record = self.leg.record
        if record.status == PENDING:
            return None
        u = record.usage
        refused = {r["leg_id"]: r["reason"] for r in self.wave.budget_refusals}
        answer = record.answer or ""
        return Ended(
            status=record.status, reason=record.reason,
            answers=(answer,) if record.status == COMPLETE else (),
            excluded=f"not launched: {refused[record.leg_id]}"
            if record.leg_id in refused else None,
            fields=dict(command=record.model, answer=keep_answer(answer),
                        leg_id=record.leg_id, answer_chars=len(answer),
                        input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                        cached_tokens=u.cached_tokens,
                        tokens=u.input_tokens + u.output_tokens, steps=record.steps,
                        secs=round(record.duration_s or 0.0, 3), cost_usd=record.cost_usd,
                        cost_source=record.cost_source))


def _prepare(task: Task) -> Snapshot:
    root = make_folder(task)
    try:
        return snapshot(root)
    finally:
        remove_folder(root)


def exclusions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"task": r["task"], "contestant": r["contestant"], "trial": r["trial"],
             "reason": r["excluded"]} for r in rows if r.get("excluded")]
