"""Live progress on stderr: a rich table on a terminal, plain lines otherwise."""

from __future__ import annotations

import math
import sys
import time

from orchestrator.engine.context import LegContext
from orchestrator.engine.record import RUNNING, LegRecord


def _cost(r: LegRecord) -> str:
    if r.cost_source == "none":
        return "-"  # nothing answered yet
    return "?" if r.cost_usd is None else f"${r.cost_usd:.4f}"


def _tokens(r: LegRecord, streamed: int = 0) -> str:
    """``input+output``; while an answer streams, its output so far is estimated (``~``,
    4 characters a token) until the provider's count arrives with the answer's end."""
    if streamed:
        return f"{r.usage.input_tokens}+~{r.usage.output_tokens + math.ceil(streamed / 4)}"
    return f"{r.usage.input_tokens}+{r.usage.output_tokens}"


def plain_line(r: LegRecord) -> str:
    """One leg's state in one line (stderr's plain progress, `orch mcp`'s notifications)."""
    if r.status == RUNNING:
        return f"{r.leg_id} {r.model} running"
    return (f"{r.leg_id} {r.model} {r.status} {_tokens(r)} tok {_cost(r)} "
            f"{r.duration_s:.1f}s" + (f" — {r.reason}" if r.reason else ""))


class PlainProgress:
    """One line per leg start and end: readable in CI logs and pipes."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self._said: dict[str, str] = {}

    def text(self, leg_id: str, text: str) -> None:
        """A streamed piece of a leg's answer: lines say starts and ends only."""
        return None

    def __call__(self, ctx: LegContext) -> None:
        r = ctx.record
        if self._said.get(r.leg_id) == r.status:
            return
        self._said[r.leg_id] = r.status
        print(f"orch: {plain_line(r)}", file=self.stream, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class LiveProgress:
    """A rich table (model, status, tokens, cost, elapsed), redrawn as legs change."""

    def __init__(self) -> None:
        from orchestrator.security import outlet

        self._legs: dict[str, LegRecord] = {}
        self._t0: dict[str, float] = {}
        self._streamed: dict[str, int] = {}  # characters streamed since the leg's last count
        # Live redraws what __rich__ returns 4 times a second, so elapsed keeps counting;
        # its strings (a model's name) are made inert as they are drawn.
        self._live = outlet.live(self, stderr=True, refresh_per_second=4, transient=False)

    def __rich__(self):
        return self._table()

    def _table(self):
        from rich.table import Table

        table = Table(title="orch wave", expand=False)
        for col in ("leg", "model", "status", "tokens", "cost", "elapsed"):
            table.add_column(col)
        for r in self._legs.values():
            elapsed = r.duration_s if r.status != RUNNING else time.monotonic() - self._t0[
                r.leg_id]
            streamed = self._streamed.get(r.leg_id, 0) if r.status == RUNNING else 0
            table.add_row(r.leg_id.rsplit("-", 1)[-1], r.model, r.status,
                          _tokens(r, streamed), _cost(r), f"{elapsed:.1f}s")
        return table

    def text(self, leg_id: str, text: str) -> None:
        """A streamed piece of a leg's answer: its tokens so far grow with it."""
        self._streamed[leg_id] = self._streamed.get(leg_id, 0) + len(text)

    def __call__(self, ctx: LegContext) -> None:
        before = self._legs.get(ctx.record.leg_id)
        if before is None or before.usage != ctx.record.usage:  # billed: the counts are real
            self._streamed.pop(ctx.record.leg_id, None)
        self._legs[ctx.record.leg_id] = ctx.record
        self._t0.setdefault(ctx.record.leg_id, time.monotonic())

    def __enter__(self):
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.refresh()
        self._live.__exit__(*exc)


class NoProgress(PlainProgress):
    def __call__(self, ctx: LegContext) -> None:
        return None


def make_progress(quiet: bool = False, live: bool = True):
    """``live``: False when the answer itself streams to the terminal (a single-leg run):
    a redrawn table would cut the text it prints above itself into lines."""
    if quiet:
        return NoProgress()
    if live and sys.stderr.isatty():
        return LiveProgress()
    return PlainProgress()
