"""One bench trial, whatever the contestant: a model, an ensemble (a fanout, a council, a
deliberation) or a command. Every kind runs through :func:`run`, the one skeleton: its turn,
a fresh folder, the attempt, the attempt's record in the row, the hidden check, the folder
removed, the row kept and reported.

The rule that an error is never a pass lives here, in the shape of the data. An attempt
ends as an :class:`Ended`: a status, a reason, the fields of its row, and the answers a check
may grade, which only a *completed* attempt can hold (``Ended`` refuses answers with any
other status). A trial is counted by an :class:`Outcome`, whose ``passed`` is derived, never
given: true only when a check ran on one of those answers and said yes. A timeout, a limit,
a provider error, an exit code, unreadable output: no answer, so no check, so a failure (or
an exclusion, where the attempt says why it is not counted). ``row["passed"]`` is written
only by :func:`settle`; ``tests/test_bench_errors_fail.py`` holds that no other module writes
it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from orchestrator.bakeoff.tasks import CHECK_OUTPUT_KEEP, Task, Verdict, grade
from orchestrator.engine.record import ABORTED, COMPLETE
from orchestrator.security.capped import cap
from orchestrator.security.secrets import scrub

REASON_KEEP = 500  # characters of a reason kept (results and ledger)
ANSWER_KEEP = 100_000  # characters of an answer kept in the results (the start)


def keep_answer(text: str) -> str:
    """What a row keeps of an answer (the start); the check grades the whole one."""
    return cap(text, ANSWER_KEEP)


@dataclass(frozen=True)
class Ended:
    """What an attempt left behind. ``answers``: what a check may grade (a chair's, a
    model's, each complete member's of a fanout without a chair); only a complete attempt
    has any. ``excluded``: why the trial is not counted (set-up failed, never launched).
    ``fields``: the rest of its row (usage, cost, seconds, its command or wave)."""

    status: str
    reason: str | None = None
    answers: tuple[str, ...] = ()
    excluded: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.answers and self.status != COMPLETE:
            raise ValueError(f"an attempt that ended {self.status!r} has no answer to grade")
        if not isinstance(self.answers, tuple):
            raise TypeError("answers is a tuple of strings")


@dataclass(frozen=True)
class Outcome:
    """How a trial is counted: excluded (with why), or counted with the verdict of the check
    run on its answer (None: there was no completed answer to run it on: a failure)."""

    excluded: str | None = None
    verdict: Verdict | None = None

    @property
    def passed(self) -> bool:
        v = self.verdict
        return self.excluded is None and v is not None and v.error is None and v.passed

    @property
    def said(self) -> str:
        """What the check said (nothing when none ran)."""
        return "" if self.verdict is None else self.verdict.output


def judge(task: Task, ended: Ended, folder: Path | None, guard: Any) -> Outcome:
    """The hidden check over the completed answers, in order, until one passes (one answer:
    a model's or a chair's; several: a fanout without a chair, any member). A check that
    could not grade excludes the trial. Blocking: call it in a worker thread."""
    if ended.excluded is not None:
        return Outcome(excluded=ended.excluded)
    verdict = None
    for answer in ended.answers:
        verdict = grade(task, answer, folder, guard)
        if verdict.error is not None:
            return Outcome(excluded=scrub(cap(verdict.error, REASON_KEEP)), verdict=verdict)
        if verdict.passed:
            break
    return Outcome(verdict=verdict)


def settle(row: dict[str, Any], outcome: Outcome) -> None:
    """The one place a trial's ``passed`` is written: from the outcome, never by hand."""
    row["passed"] = outcome.passed
    # a verify's output is capped already; this bounds what a python check says
    row["check_output"] = scrub(cap(outcome.said, 4 * CHECK_OUTPUT_KEEP))
    if outcome.excluded is not None:
        row["excluded"] = outcome.excluded


def fill(row: dict[str, Any], ended: Ended) -> None:
    """The attempt's record in its row (an exclusion already there stands)."""
    row.update(ended.fields, status=ended.status, reason=ended.reason)
    if ended.excluded is not None and row["excluded"] is None:
        row["excluded"] = ended.excluded


def cut(row: dict[str, Any], why: str) -> dict[str, Any]:
    """A trial an interrupt cut short: kept, listed, never counted (pass or fail)."""
    if row["excluded"] is not None:  # excluded already (set-up failed): that reason stands
        return row
    settle(row, Outcome(excluded=f"interrupted: {why} before it was graded"))
    if row["status"] in (None, "running"):
        row["status"] = ABORTED
    return row


def base_row(n: int, task: str, contestant: str, kind: str, trial: int) -> dict[str, Any]:
    """A trial's row before anything ran: not passed, nothing excluded, nothing known."""
    return {"n": n, "task": task, "contestant": contestant, "kind": kind, "trial": trial,
            "passed": False, "excluded": None, "answer": "", "stdout": "", "stderr": "",
            "command": None, "check_output": "", "status": None, "reason": None,
            "tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0,
            "steps": 0, "secs": 0.0, "cost_usd": None, "cost_source": "unknown",
            "leg_id": None, "answer_chars": 0, "stdout_bytes": 0, "stderr_bytes": 0}


class Attempt(Protocol):
    """One contestant kind's way to an answer in a trial folder (``bakeoff/run.py``'s
    model legs, ``command.py``, ``ensemble.py``, ``deliberating.py``)."""

    def turn(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Waits for the attempt's turn and holds its limit while it runs."""

    async def start(self, folder: Path) -> None:
        """Run in ``folder`` to the end (an interrupt stops it, as it stops a wave)."""

    async def skip(self, why: str | None) -> None:
        """It never began: set-up failed (``why``) or an interrupt came first (None)."""

    def ended(self) -> Ended | None:
        """What it left (None: nothing to record, e.g. a council stopped mid-stage)."""


class Trials(Protocol):
    """What the skeleton needs of the bench's runner (``bakeoff/run.py``)."""

    signum: int | None
    guard: Any

    def interrupted_by(self) -> str: ...
    async def folder(self, task: Task, row: dict[str, Any]) -> Path | None: ...
    async def finish(self, slot: Any, folder: Path | None,
                     row: dict[str, Any] | None) -> None: ...


async def run(runner: Trials, slot: Any, attempt: Attempt) -> None:
    """One trial from its turn to its kept row (see the module's docstring)."""
    row = base_row(slot.n, slot.task.id, slot.contestant.name, slot.contestant.kind,
                   slot.trial)
    folder, began = None, False
    try:
        async with attempt.turn():
            if runner.signum is None:
                folder = await runner.folder(slot.task, row)
            if folder is not None and runner.signum is None:
                began = True
                await attempt.start(folder)
            else:  # set-up failed (the row says why), or an interrupt came first
                await attempt.skip(row["excluded"])
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            if began:
                _recorded(row, attempt)
            else:
                await attempt.skip(None)
            await runner.finish(slot, folder, cut(row, runner.interrupted_by())
                                if began else None)
        raise
    except BaseException:
        await runner.finish(slot, folder, None)
        raise
    if not began:  # kept only as an exclusion (set-up failed); an interrupted one is not
        _recorded(row, attempt)
        await runner.finish(slot, folder, row if row["excluded"] is not None else None)
        return
    ended = _recorded(row, attempt)
    if runner.signum is not None:  # the interrupt stopped it: cut short, never graded
        await runner.finish(slot, folder, cut(row, runner.interrupted_by()))
        return
    try:
        outcome = await anyio.to_thread.run_sync(
            judge, slot.task, ended or Ended(status=row["status"] or ABORTED), folder,
            runner.guard)
        if outcome.excluded is not None and runner.signum is not None:
            cut(row, runner.interrupted_by())  # the interrupt killed the check
        else:
            settle(row, outcome)
        await anyio.lowlevel.checkpoint()  # an interrupt that arrived meanwhile is seen here
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await runner.finish(slot, folder, cut(row, runner.interrupted_by()))
        raise
    except BaseException:
        await runner.finish(slot, folder, None)
        raise
    await runner.finish(slot, folder, row)


def _recorded(row: dict[str, Any], attempt: Attempt) -> Ended | None:
    ended = attempt.ended()
    if ended is not None:
        fill(row, ended)
    return ended
