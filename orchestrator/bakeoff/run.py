"""Running a bench: every trial in a fresh folder, graded by the hidden check.

Model trials are one-leg waves on ONE shared server (one rate gate, one ledger sink), with the
trial folder as the workspace and ``kind="bench"``, ``run_id`` = the bench id. Every trial
spends through the bench's one account (orchestrator/account; a resume's is opened from the
ledger), so a run ceiling (the cost_ceiling plugin's) bounds the whole bench and its resumes,
not each trial; a launch only the others' open claims keep out waits for them to settle.
Command trials run as subprocesses in worker threads, one at a time per contestant unless it says
``jobs = N``. A trial whose set-up failed (or that the ceiling never launched) is excluded
and listed, never counted as a failure.

A signal (Ctrl-C, SIGTERM, or a daemon job's interrupt) stops the bench as it stops a wave:
running legs abort, command contestants' process groups are killed, no new trial starts, and
every trial graded so far is kept. Trials cut short are listed as excluded ``interrupted``
rows; the CLI writes the partial results file (see ``cli/bench_run.py``).
"""

from __future__ import annotations

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
from orchestrator.bakeoff.guard import Guard
from orchestrator.bakeoff.plan import Plan
from orchestrator.bakeoff.tasks import (
    CHECK_OUTPUT_KEEP,
    Snapshot,
    Task,
    grade,
    make_folder,
    materialize,
    remove_folder,
    slug,
    snapshot,
    start_key,
)
from orchestrator.engine.record import ABORTED, PENDING
from orchestrator.engine.wave import Wave, WaveSpec, new_wave_id
from orchestrator.hookspecs import hookimpl
from orchestrator.security.capped import cap
from orchestrator.security.secrets import scrub

OUTPUT_KEEP = 20_000  # characters of a command's stdout/stderr kept in the results (the end)
ANSWER_KEEP = 100_000  # characters of an answer kept in the results (the start)
REASON_KEEP = 500  # characters of a reason kept (results and ledger)


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
            for trial in range(1, plan.trials + 1):
                n += 1
                out.append(Slot(n, task, c, trial))
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

    @staticmethod
    def keep_answer(text: str) -> str:
        """What a row keeps of an answer (the start)."""
        return cap(text, ANSWER_KEEP)

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
        from orchestrator.bakeoff import deliberating, ensemble

        # no cancel scope of the runner's: an interrupt stops each wave or council (it
        # finishes its own files), and a trial not yet begun sees ``signum`` and never starts
        async with anyio.create_task_group() as tg:
            for slot in slots:
                c = slot.contestant
                tg.start_soon(deliberating.trial if c.deliberates else ensemble.trial
                              if c.kind == "fanout" else ensemble.council_trial, self, slot)

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
                        max_steps=c.max_steps, kind="bench", run_id=self.bench_id,
                        wave_id=f"{self.bench_id}-{self.wave_prefix}{j}", project_dir=os.getcwd(),
                        options=options)
        wave = BenchWave(spec, pm=self.pms[c.name], config=self.config, ledger=self.ledger,
                         server=self.server, account=self.account)
        wave.runner, wave.slot_of = self, {leg.ctx.leg_id: s
                                           for leg, s in zip(wave.legs, slots, strict=True)}
        return wave

    async def model_trial(self, wave, leg, slot: Slot) -> None:
        """Launch one leg in its own fresh folder (in slot order, ``jobs`` at a time), then
        grade it."""
        row, folder = self.base_row(slot), None
        try:
            if slot.n in self.after:
                await self.turns[self.after[slot.n]].wait()
            async with self.model_limit:
                self.turns[slot.n].set()
                folder = await self.folder(slot.task, row)
                if folder is None:  # the trial never started: its leg ends refused, with its row
                    await leg.refuse(row["excluded"])
                else:
                    leg.ctx.workspace = folder
                    leg.ctx.options = {**leg.ctx.options, "workspace": str(folder)}
                    await Wave._launch(wave, leg)
            self._model_row(row, leg.record, wave)
            await self.grade(slot, folder, row, leg.record.answer or "")
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                if leg.record.status == PENDING:  # never launched: wave.json says aborted
                    leg.record.finish(ABORTED, "aborted: the bench was interrupted before "
                                      "this trial started")
                    await self.finish(slot, folder, None)
                else:
                    self._model_row(row, leg.record, wave)
                    await self.finish(slot, folder, self._cut(row))
            raise
        except BaseException:
            await self.finish(slot, folder, None)
            raise
        await self.finish(slot, folder, row)

    async def command_trial(self, slot: Slot) -> None:
        row, folder, started = self.base_row(slot), None, False
        try:
            async with self.command_limits[slot.contestant.name]:
                folder = await self.folder(slot.task, row)
                if folder is not None:
                    started = True
                    answer = await self._command(slot, folder, row)
                    # its thread is waited for, not abandoned: an interrupt that killed the
                    # command is seen here, so a killed command is never graded as a failure
                    await anyio.lowlevel.checkpoint()
                    await self.grade(slot, folder, row, answer)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.finish(slot, folder, self._cut(row) if started else None)
            raise
        except BaseException:
            await self.finish(slot, folder, None)
            raise
        await self.finish(slot, folder, row)

    def _cut(self, row: dict[str, Any]) -> dict[str, Any]:
        """A trial the interrupt cut short: kept, listed, never counted (pass or fail)."""
        import signal

        if row["excluded"] is not None:  # excluded already (set-up failed): that reason stands
            return row
        name = signal.Signals(self.signum).name if self.signum else "an interrupt"
        why = self.stop_reason or f"{name} arrived"
        row.update(passed=False, check_output="",
                   excluded=f"interrupted: {why} before it was graded")
        if row["status"] in (None, "running"):
            row["status"] = ABORTED
        return row

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

    async def grade(self, slot: Slot, folder: Path | None, row: dict[str, Any],
                    answer: str | None = None) -> None:
        """The hidden check, off the event loop (a command or a child process). A check
        that could not grade excludes the trial, saying why. ``answer``: the whole answer
        when the row keeps a capped one."""
        if row["excluded"] is not None:
            return
        verdict = await anyio.to_thread.run_sync(
            grade, slot.task, row["answer"] if answer is None else answer, folder, self.guard)
        row["passed"] = verdict.passed
        # a verify's output is capped already; this bounds what a python check says
        row["check_output"] = scrub(cap(verdict.output, 4 * CHECK_OUTPUT_KEEP))
        if verdict.error and self.signum is not None:  # the interrupt killed the check
            self._cut(row)
        elif verdict.error:
            row["passed"] = False
            row["excluded"] = scrub(cap(verdict.error, REASON_KEEP))
        await anyio.lowlevel.checkpoint()  # an interrupt that arrived meanwhile is seen here

    def base_row(self, slot: Slot) -> dict[str, Any]:
        return {"n": slot.n, "task": slot.task.id, "contestant": slot.contestant.name,
                "kind": slot.contestant.kind, "trial": slot.trial, "passed": False,
                "excluded": None, "answer": "", "stdout": "", "stderr": "", "command": None,
                "check_output": "", "status": None, "reason": None, "tokens": 0,
                "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "steps": 0,
                "secs": 0.0, "cost_usd": None, "cost_source": "unknown", "leg_id": None,
                "answer_chars": 0, "stdout_bytes": 0, "stderr_bytes": 0}

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

    def _model_row(self, row: dict[str, Any], record, wave) -> None:
        u = record.usage
        row.update(command=record.model, status=record.status, reason=record.reason,
                   answer=cap(record.answer or "", ANSWER_KEEP), leg_id=record.leg_id,
                   answer_chars=len(record.answer or ""),
                   input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                   cached_tokens=u.cached_tokens, tokens=u.input_tokens + u.output_tokens,
                   steps=record.steps, secs=round(record.duration_s or 0.0, 3),
                   cost_usd=record.cost_usd, cost_source=record.cost_source)
        refused = {r["leg_id"]: r["reason"] for r in wave.budget_refusals}
        if record.leg_id in refused and row["excluded"] is None:
            row["excluded"] = f"not launched: {refused[record.leg_id]}"

    async def _command(self, slot: Slot, folder: Path, row: dict[str, Any]) -> str:
        """Run a command trial and read what it printed (a parser in a child process); what
        is kept of its output is capped, its full size recorded. Returns the whole answer
        (the row keeps a capped one) for the check."""
        c = slot.contestant
        prompt = self.plan.render(slot.task)
        timeout = c.timeout_s or self.plan.timeout_s
        done = await anyio.to_thread.run_sync(cmd.run_command, c, prompt, folder,
                                              slot.task.check, timeout, self.guard)
        stdout = done.stdout.text()
        reported: cmd.Reported | str = cmd.Reported(answer="")
        if done.exit_code is not None and not done.stdout.cut and not done.interrupted:
            reported = await anyio.to_thread.run_sync(cmd.parse_output, c.parse, stdout,
                                                      self.guard)
        unread = reported if isinstance(reported, str) else None
        if unread is not None:
            reported = cmd.Reported(answer="")
        status, reason = "complete", None
        if done.timed_out:
            # however much it printed: the engine's word for a leg past its limit, and the
            # ledger's (status error, reason timeout)
            status, reason = "error", f"timeout: the command ran past its {timeout:g} s limit"
        elif done.error:
            status, reason = "error", done.error
        elif done.exit_code != 0:
            status, reason = "error", (f"killed by {done.killed_by}" if done.killed_by
                                       else f"exit {done.exit_code}")
        elif done.stdout.cut:
            status, reason = "error", (f"it printed {done.stdout.size:,} bytes; orch reads at "
                                       f"most {len(done.stdout.data):,}")
        elif unread is not None:
            status, reason = "error", unread
        answer = reported.answer if status == "complete" else ""
        row.update(command=scrub(" ".join(_quote(a) for a in done.argv)), status=status,
                   reason=scrub(cap(reason, REASON_KEEP)) if reason else None,
                   answer=scrub(cap(answer, ANSWER_KEEP)), answer_chars=len(answer),
                   stdout=scrub(cap(stdout, OUTPUT_KEEP, tail=True, size=done.stdout.size)),
                   stderr=scrub(cap(done.stderr.text(), OUTPUT_KEEP, tail=True,
                                    size=done.stderr.size)),
                   stdout_bytes=done.stdout.size, stderr_bytes=done.stderr.size,
                   input_tokens=reported.input_tokens, output_tokens=reported.output_tokens,
                   cached_tokens=reported.cached_tokens,
                   # a command that reports no usage has unknown tokens, not 0 of them
                   tokens=reported.input_tokens + reported.output_tokens
                   if reported.read else None,
                   steps=reported.steps, secs=round(done.secs, 3),
                   cost_usd=reported.cost_usd,
                   cost_source="reported" if reported.cost_usd is not None else "unknown",
                   leg_id=f"{self.bench_id}-{slot.n:04d}")
        if done.error and done.exit_code is None:
            row["excluded"] = f"set-up failed: {done.error}"
        elif done.sandbox_failed():
            row["excluded"] = scrub(cap(f"set-up failed: {done.sandbox_failed()}", REASON_KEEP))
        # output its parser cannot read stays a counted failure (status error, said why):
        # what a command prints is its own doing, so it must not buy an exclusion
        if self.ledger is not None and reported.read:
            with anyio.CancelScope(shield=True):  # reported spend outlives an interrupt
                await self.ledger.append(self.ledger_row(row, c))
        return answer

    def ledger_row(self, row: dict[str, Any], c: cmd.Contestant) -> dict[str, Any]:
        """A command trial's own report of its spend (cost source ``reported``)."""
        return {"wave_id": self.bench_id, "leg_id": row["leg_id"], "kind": "bench",
                "model": f"command/{c.name}", "provider": "command",
                "status": row["status"], "reason": row["reason"],
                "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
                "cached_tokens": row["cached_tokens"], "cost_usd": row["cost_usd"],
                "cost_source": row["cost_source"], "duration_s": row["secs"],
                "project_dir": os.getcwd(), "run_id": self.bench_id}


def _prepare(task: Task) -> Snapshot:
    root = make_folder(task)
    try:
        return snapshot(root)
    finally:
        remove_folder(root)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def exclusions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"task": r["task"], "contestant": r["contestant"], "trial": r["trial"],
             "reason": r["excluded"]} for r in rows if r.get("excluded")]
