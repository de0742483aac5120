"""A command contestant's attempt at a trial: the program run confined in the trial folder
(:func:`orchestrator.bakeoff.contestants.run_command`, in a worker thread), what it printed
read by its parser in a child process, its own report of its spend in the ledger.

It completes only when the program exited 0 within its limit, printed text (UTF-8, no NUL)
under orch's cap, and its parser read that text; any other end is ``error`` with the reason
(``timeout: …``, ``exit 3``, ``killed by SIGSEGV``, ``it printed 20,971,520 bytes; …``,
``it printed binary output …``, an unreadable output), which leaves it no answer to grade: a
counted failure (bakeoff/trial.py). What a command prints is its own doing, so it never buys
an exclusion; only a sandbox or a start that failed excludes the trial (set-up).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from orchestrator.bakeoff import contestants as cmd
from orchestrator.bakeoff.trial import REASON_KEEP, Ended, keep_answer
from orchestrator.engine.record import COMPLETE, ERROR
from orchestrator.security.capped import cap
from orchestrator.security.secrets import scrub

OUTPUT_KEEP = 20_000  # characters of a command's stdout/stderr kept in the results (the end)

Runner = Slot = Any  # orchestrator.bakeoff.run's, which calls these (no import: no cycle)


def unreadable(data: bytes) -> str | None:
    """Why ``data`` is not text a check can read (None: it is UTF-8 without NUL bytes)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"it printed binary output (not UTF-8 text at byte {exc.start:,})"
    nul = data.find(b"\0")
    if nul >= 0:
        return f"it printed binary output (a NUL byte at byte {nul:,})"
    return None


@dataclass
class CommandAttempt:
    runner: Runner
    slot: Slot
    _ended: Ended | None = None

    def turn(self):
        return self.runner.command_limits[self.slot.contestant.name]

    async def skip(self, why: str | None) -> None:
        return None

    def ended(self) -> Ended | None:
        return self._ended

    async def start(self, folder: Path) -> None:
        """Run it and read what it printed; what is kept of its output is capped, its full
        size recorded. Its thread is waited for, not abandoned: an interrupt that killed the
        command is seen by the skeleton, so a killed command is never graded."""
        runner, slot = self.runner, self.slot
        c = slot.contestant
        prompt = runner.plan.render(slot.task)
        timeout = c.timeout_s or runner.plan.timeout_s
        done = await anyio.to_thread.run_sync(cmd.run_command, c, prompt, folder,
                                              slot.task.check, timeout, runner.guard)
        stdout = done.stdout.text()
        binary = unreadable(done.stdout.data)
        reported: cmd.Reported | str = cmd.Reported(answer="")
        if done.exit_code == 0 and not done.stdout.cut and not done.interrupted \
                and not done.timed_out and binary is None:
            reported = await anyio.to_thread.run_sync(cmd.parse_output, c.parse, stdout,
                                                      runner.guard)
        unread = reported if isinstance(reported, str) else None
        if unread is not None:
            reported = cmd.Reported(answer="")
        status, reason = COMPLETE, None
        if done.timed_out:
            # however much it printed: the engine's word for a leg past its limit, and the
            # ledger's (status error, reason timeout)
            status, reason = ERROR, f"timeout: the command ran past its {timeout:g} s limit"
        elif done.error:
            status, reason = ERROR, done.error
        elif done.exit_code != 0:
            status, reason = ERROR, (f"killed by {done.killed_by}" if done.killed_by
                                     else f"exit {done.exit_code}")
        elif done.stdout.cut:
            status, reason = ERROR, (f"it printed {done.stdout.size:,} bytes; orch reads at "
                                     f"most {len(done.stdout.data):,}")
        elif binary is not None:
            status, reason = ERROR, binary
        elif unread is not None:
            status, reason = ERROR, unread
        answer = reported.answer if status == COMPLETE else ""
        excluded = None
        if done.error and done.exit_code is None:
            excluded = f"set-up failed: {done.error}"
        elif done.sandbox_failed():
            excluded = scrub(cap(f"set-up failed: {done.sandbox_failed()}", REASON_KEEP))
        fields = dict(
            command=scrub(" ".join(shlex.quote(a) for a in done.argv)),
            answer=scrub(keep_answer(answer)), answer_chars=len(answer),
            stdout=scrub(cap(stdout, OUTPUT_KEEP, tail=True, size=done.stdout.size)),
            stderr=scrub(cap(done.stderr.text(), OUTPUT_KEEP, tail=True,
                             size=done.stderr.size)),
            stdout_bytes=done.stdout.size, stderr_bytes=done.stderr.size,
            input_tokens=reported.input_tokens, output_tokens=reported.output_tokens,
            cached_tokens=reported.cached_tokens,
            # a command that reports no usage has unknown tokens, not 0 of them
            tokens=reported.input_tokens + reported.output_tokens if reported.read else None,
            steps=reported.steps, secs=round(done.secs, 3), cost_usd=reported.cost_usd,
            cost_source="reported" if reported.cost_usd is not None else "unknown",
            leg_id=f"{runner.bench_id}-{slot.n:04d}")
        self._ended = Ended(status=status,
                            reason=scrub(cap(reason, REASON_KEEP)) if reason else None,
                            answers=(answer,) if status == COMPLETE else (),
                            excluded=excluded, fields=fields)
        if runner.ledger is not None and reported.read:
            with anyio.CancelScope(shield=True):  # reported spend outlives an interrupt
                await runner.ledger.append(ledger_row(runner.bench_id, self._ended, c))


def ledger_row(bench_id: str, ended: Ended, c: cmd.Contestant) -> dict[str, Any]:
    """A command trial's own report of its spend (cost source ``reported``)."""
    f = ended.fields
    return {"wave_id": bench_id, "leg_id": f["leg_id"], "kind": "bench",
            "model": f"command/{c.name}", "provider": "command",
            "status": ended.status, "reason": ended.reason,
            "input_tokens": f["input_tokens"], "output_tokens": f["output_tokens"],
            "cached_tokens": f["cached_tokens"], "cost_usd": f["cost_usd"],
            "cost_source": f["cost_source"], "duration_s": f["secs"],
            "project_dir": os.getcwd(), "run_id": bench_id}
