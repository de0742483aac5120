"""Running a bench: every trial in a fresh folder, graded by the hidden check.

Model trials are one-leg waves on ONE shared server (one rate gate, one ledger sink), with the
trial folder as the workspace and ``kind="bench"``, ``run_id`` = the bench id. The waves share
one cost-ceiling state, so ``--max-cost`` bounds the whole bench, not each trial. Command
trials run as subprocesses in worker threads, one at a time per contestant unless it says
``jobs = N``. A trial whose set-up failed (or that the ceiling never launched) is excluded
and listed, never counted as a failure.
"""

from __future__ import annotations

import os
import secrets as _random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from orchestrator.bakeoff import contestants as cmd
from orchestrator.bakeoff.plan import Plan
from orchestrator.bakeoff.tasks import Task, copy_folder, grade, make_folder, remove_folder
from orchestrator.hookspecs import hookimpl
from orchestrator.secrets import scrub

OUTPUT_KEEP = 20_000  # characters of a command's stdout/stderr kept in the results


def new_bench_id() -> str:
    return "bench-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + _random.token_hex(2)


class TierPin:
    """A contestant's ``tier`` wins over the tiers plugin's choice (runs after it)."""

    @hookimpl
    def leg_start(self, leg):
        tier = leg.options.get("bench_tier")
        if tier:
            leg.tier = tier
            leg.set("tier", tier)
            leg.set("tier_source", "bench")


@dataclass
class Slot:
    n: int
    task: Task
    contestant: cmd.Contestant
    trial: int


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

    def slots(self) -> list[Slot]:
        """task → contestant → trial."""
        out, n = [], 0
        for task in self.plan.tasks:
            for c in self.plan.contestants:
                for trial in range(1, self.plan.trials + 1):
                    n += 1
                    out.append(Slot(n, task, c, trial))
        return out

    async def run(self) -> list[dict[str, Any]]:
        from orchestrator.server import Server

        slots = self.slots()
        self.server = Server(timeout_s=self.plan.timeout_s)
        self.server.wave_size = self.plan.jobs
        self.ceiling_state: dict[str, Any] = {}  # shared by every wave: one bench budget
        self.model_limit = anyio.CapacityLimiter(self.plan.jobs)
        self.command_limits = {c.name: anyio.CapacityLimiter(c.jobs)
                               for c in self.plan.contestants if c.kind == "command"}
        self.templates: dict[str, Path | BaseException] = {}  # task id -> its start state
        self.template_locks = {t.id: anyio.Lock() for t in self.plan.tasks}
        rows: list[dict[str, Any] | None] = [None] * len(slots)

        async def one(i: int, slot: Slot) -> None:
            limit = self.model_limit if slot.contestant.kind == "model" else \
                self.command_limits[slot.contestant.name]
            async with limit:
                rows[i] = await self.trial(slot)
            self.on_trial(rows[i])

        try:
            async with anyio.create_task_group() as tg:
                for i, slot in enumerate(slots):
                    tg.start_soon(one, i, slot)
        finally:
            for template in self.templates.values():
                if isinstance(template, Path):
                    remove_folder(template)
        self.results = [r for r in rows if r is not None]
        return self.results

    def base_row(self, slot: Slot) -> dict[str, Any]:
        return {"n": slot.n, "task": slot.task.id, "contestant": slot.contestant.name,
                "kind": slot.contestant.kind, "trial": slot.trial, "passed": False,
                "excluded": None, "answer": "", "stdout": "", "stderr": "", "command": None,
                "check_output": "", "status": None, "reason": None, "tokens": 0,
                "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "steps": 0,
                "secs": 0.0, "cost_usd": None, "cost_source": "unknown", "leg_id": None}

    async def trial(self, slot: Slot) -> dict[str, Any]:
        row = self.base_row(slot)
        try:
            folder = await anyio.to_thread.run_sync(copy_folder, await self.template(slot.task))
        except Exception as exc:  # the trial never started: excluded, and said why
            row["excluded"] = scrub(f"set-up failed: {type(exc).__name__}: {exc}")[:500]
            return row
        try:
            if slot.contestant.kind == "model":
                await self._model(slot, folder, row)
            else:
                await self._command(slot, folder, row)
            if row["excluded"] is None:
                row["passed"], row["check_output"] = await anyio.to_thread.run_sync(
                    grade, slot.task, row["answer"], folder)
        finally:
            await anyio.to_thread.run_sync(remove_folder, folder)
        return row

    async def template(self, task: Task) -> Path:
        """The task's start state, made once (files + git) and copied for each trial; a
        failure is kept, so every trial of that task is excluded with the same reason."""
        async with self.template_locks[task.id]:
            if task.id not in self.templates:
                try:
                    self.templates[task.id] = await anyio.to_thread.run_sync(make_folder, task)
                except Exception as exc:
                    self.templates[task.id] = exc
        made = self.templates[task.id]
        if isinstance(made, BaseException):
            raise made
        return made

    async def _model(self, slot: Slot, folder: Path, row: dict[str, Any]) -> None:
        from orchestrator.engine.wave import Wave, WaveSpec

        c = slot.contestant
        options: dict[str, Any] = {"plugins": True, "tools": c.tools, "workspace": str(folder),
                                   "bench_tier": c.tier}
        if self.plan.max_cost is not None:
            options["max_cost"] = self.plan.max_cost
        spec = WaveSpec(models=[self.resolved[c.name]], briefing=self.plan.render(slot.task),
                        runs_dir=self.runs_dir, timeout_s=self.plan.timeout_s,
                        max_steps=c.max_steps, workspace=folder, kind="bench",
                        run_id=self.bench_id, wave_id=f"{self.bench_id}-{slot.n:04d}",
                        project_dir=os.getcwd(), options=options)
        wave = Wave(spec, pm=self.pms[c.name], config=self.config, ledger=self.ledger,
                    server=self.server)
        wave.context.state = self.ceiling_state
        await wave.run()
        record = wave.legs[0].record
        u = record.usage
        row.update(command=record.model, status=record.status, reason=record.reason,
                   answer=record.answer or "", leg_id=record.leg_id,
                   input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                   cached_tokens=u.cached_tokens, tokens=u.input_tokens + u.output_tokens,
                   steps=record.steps, secs=round(record.duration_s or 0.0, 3),
                   cost_usd=record.cost_usd, cost_source=record.cost_source)
        if record.status == "refused" and record.requests == 0 and wave.budget_refusals:
            row["excluded"] = f"not launched: {record.reason}"

    async def _command(self, slot: Slot, folder: Path, row: dict[str, Any]) -> None:
        c = slot.contestant
        prompt = self.plan.render(slot.task)
        timeout = c.timeout_s or self.plan.timeout_s
        result = await anyio.to_thread.run_sync(cmd.run_command, c, prompt, folder,
                                                slot.task.check, timeout)
        reported = cmd.parse_output(c.parse, result.stdout)
        status = "complete" if result.exit_code == 0 and not result.timed_out else "error"
        reason = (f"timeout: the command ran past its {timeout:g} s limit" if result.timed_out
                  else result.error or (None if result.exit_code == 0
                                        else f"exit {result.exit_code}"))
        row.update(command=scrub(" ".join(_quote(a) for a in result.argv)), status=status,
                   reason=reason, answer=reported.answer if status == "complete" else "",
                   stdout=scrub(result.stdout[-OUTPUT_KEEP:]),
                   stderr=scrub(result.stderr[-OUTPUT_KEEP:]),
                   input_tokens=reported.input_tokens, output_tokens=reported.output_tokens,
                   cached_tokens=reported.cached_tokens,
                   tokens=reported.input_tokens + reported.output_tokens,
                   steps=reported.steps, secs=round(result.secs, 3),
                   cost_usd=reported.cost_usd,
                   cost_source="reported" if reported.cost_usd is not None else "unknown",
                   leg_id=f"{self.bench_id}-{slot.n:04d}")
        if result.error and result.exit_code is None:
            row["excluded"] = f"set-up failed: {result.error}"
        if self.ledger is not None and reported.read:
            await self.ledger.append(self.ledger_row(row, c))

    def ledger_row(self, row: dict[str, Any], c: cmd.Contestant) -> dict[str, Any]:
        """A command trial's own report of its spend (cost source ``reported``)."""
        return {"wave_id": self.bench_id, "leg_id": row["leg_id"], "kind": "bench",
                "model": f"command/{c.name}", "provider": "command",
                "status": row["status"], "reason": row["reason"],
                "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
                "cached_tokens": row["cached_tokens"], "cost_usd": row["cost_usd"],
                "cost_source": row["cost_source"], "duration_s": row["secs"],
                "project_dir": os.getcwd(), "run_id": self.bench_id}


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def exclusions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"task": r["task"], "contestant": r["contestant"], "trial": r["trial"],
             "reason": r["excluded"]} for r in rows if r.get("excluded")]
