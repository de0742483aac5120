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
    """A rich table (model, status, tokens, cost, elapsed), redrawn as legs change.

    ``preview``: the run's output is one leg's answer (a single-leg ``orch fanout``); the
    text of that leg's step in progress is drawn under the table as it streams (its last
    lines that fit), and gone when the step's answer is read. stdout gets the answer once,
    at the end, as in a pipe: the text of a step that ends in tool calls is not the output,
    and while it streams nothing can know that it is such a step."""

    def __init__(self, preview: bool = False) -> None:
        from orchestrator.security import outlet

        self._legs: dict[str, LegRecord] = {}
        self._t0: dict[str, float] = {}
        self._streamed: dict[str, int] = {}  # characters streamed since the leg's last count
        self._preview = preview
        self._step: dict[str, tuple] = {}  # each leg's step, as its record says (a new one:
        self._holds: dict = {}  # the preview starts again) and its text held to whole words
        self._shown: dict[str, str] = {}  # and released (masked, inert) for the preview
        # Live redraws what __rich__ returns 4 times a second, so elapsed keeps counting;
        # its strings (a model's name) are made inert as they are drawn.
        self._live = outlet.live(self, stderr=True, refresh_per_second=4, transient=False)

    def __rich__(self):
        table = self._table()
        tail = self._tail()
        if tail is None:
            return table
        from rich.console import Group

        return Group(table, tail)

    def _tail(self):
        """The previewed leg's text so far: the last lines that fit under the table (a
        live display taller than the screen could not be redrawn in place)."""
        # drawn on rich's refresh thread while the run's thread adds text: a copy
        text = next((t for t in list(self._shown.values()) if t), "")
        if not text:
            return None
        from rich.text import Text

        console = self._live.console
        room = max(1, console.height - len(self._legs) - 6)  # the table: title, rules, head
        lines = Text(text).wrap(console, max(20, console.width))
        return Text("\n").join(lines[-room:])

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
        """A streamed piece of a leg's answer: its tokens so far grow with it (and the
        preview, for the one leg whose answer is the output)."""
        self._streamed[leg_id] = self._streamed.get(leg_id, 0) + len(text)
        if not self._preview or any(k != leg_id for k in self._holds):
            return
        from orchestrator.security.word_hold import WordHold

        piece = self._holds.setdefault(leg_id, WordHold()).take(text)
        if piece:
            self._shown[leg_id] = self._shown.get(leg_id, "") + piece

    def __call__(self, ctx: LegContext) -> None:
        r = ctx.record
        before = self._legs.get(r.leg_id)
        if before is None or before.usage != r.usage:  # billed: the counts are real
            self._streamed.pop(r.leg_id, None)
        step = (r.status, r.steps, r.requests, r.usage)
        if self._step.get(r.leg_id, step) != step:  # the step's answer is read: its text
            self._shown.pop(r.leg_id, None)  # is the output (stdout, at the end) or a
            if r.leg_id in self._holds:  # tool step's (not the output): off the preview
                self._holds[r.leg_id].rest()
        self._step[r.leg_id] = step
        self._legs[r.leg_id] = r
        self._t0.setdefault(r.leg_id, time.monotonic())

    def __enter__(self):
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._shown.clear()  # the table stays on the screen; the text is stdout's
        self._live.refresh()
        self._live.__exit__(*exc)


class NoProgress(PlainProgress):
    def __call__(self, ctx: LegContext) -> None:
        return None


def make_progress(quiet: bool = False, preview: bool = False):
    """The live table on a terminal, plain lines otherwise. ``preview``: the run's output is
    one leg's answer, drawn under the table as it streams (:class:`LiveProgress`)."""
    if quiet:
        return NoProgress()
    if sys.stderr.isatty():
        return LiveProgress(preview=preview)
    return PlainProgress()
