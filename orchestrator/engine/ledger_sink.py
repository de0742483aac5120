"""Appending ledger rows from a running wave: off the event loop, bounded, and never lost.

The ledger gets one deadline per wave — ``BUDGET_S`` seconds in total (``ORCH_LEDGER_DEADLINE_S``
sets it), from opening it to every row's commit, lock waits and retries included, not per
row. Every call into the database runs on a daemon worker thread that is abandoned at the
deadline (``tool_thread``): no client library, lock or frozen server can hold the wave past
it, whatever its own timeouts do (a PostgreSQL server stopped with its connection open never
enforces ``statement_timeout``). Past the deadline, or when a write fails, the rows go to the
outbox journal (:mod:`orchestrator.ledger.outbox`), fsync'd, and the next command that opens
the ledger replays them; a write an abandoned thread still finishes later is harmless, since
each row is an insert-or-advance on the ledger's unique key. After a signal (:meth:`hurry`)
the ledger gets at most ``HURRY_S`` more, so the process leaves within 2 s. Only when no
outbox location takes a row either is it an error: said once on stderr, kept in ``errors``
(``wave.json``'s ``ledger_errors``) and raised to the leg, which records it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from orchestrator.security.secrets import scrub

BUDGET_S = 30.0  # the ledger's total wait per wave before rows go to the outbox
DEADLINE_ENV = "ORCH_LEDGER_DEADLINE_S"  # sets it (tests; a team on a slow link)
HURRY_S = 1.0  # after a signal, the most the ledger may still take before the outbox
POLL_S = 0.2  # how often a wait on the ledger looks whether a signal shortened it

T = TypeVar("T")


def deadline_s() -> float:
    """The wave's ledger deadline in seconds: ``ORCH_LEDGER_DEADLINE_S`` when it is a finite
    number >= 0, else ``BUDGET_S``."""
    text = os.environ.get(DEADLINE_ENV, "").strip()
    try:
        value = float(text) if text else BUDGET_S
    except ValueError:
        value = BUDGET_S
    return value if math.isfinite(value) and value >= 0 else BUDGET_S


class LedgerLost(Exception):  # noqa: N818 - what happened to the row, not a crash
    """Neither the ledger nor any outbox took a row."""


class LedgerLate(Exception):  # noqa: N818 - what happened to the row, not a crash
    """The ledger did not answer within what was left of the wave's deadline."""


class LedgerSink:
    def __init__(self, url: str | None = None, *, budget_s: float | None = None) -> None:
        self.url = url
        self._errors: dict[str, str] = {}  # leg_id -> why its row is lost (the latest)
        self.outboxed: dict[str, str] = {}  # leg_id -> the outbox that holds its row
        self.budget_s = deadline_s() if budget_s is None else budget_s
        self._spent = 0.0
        self._cap: float | None = None  # a monotonic instant no ledger wait passes (hurry)
        self._late: str | None = None  # why the ledger was given up: rows go to the outbox
        self._ledger = None
        self._lock = anyio.Lock()
        self._pending: list[dict[str, Any]] = []
        self._outcome: dict[int, BaseException | str | None] = {}
        from orchestrator.engine.index_sink import IndexSink

        self._appending = 0  # rows on their way to the ledger now
        self.rows_idle = threading.Event()  # set while none is: the index may write
        self.rows_idle.set()
        self.search = IndexSink(url, rows_idle=self.rows_idle)  # its own writer, never in a
        # billed row's way

    # -- the deadline ------------------------------------------------------------------------
    def left(self) -> float:
        """Seconds of the ledger's deadline this sink has not used (a council's own rows and
        a run's account get what its waves left); 0 once the ledger was given up."""
        if self._late is not None:
            return 0.0
        left = max(0.0, self.budget_s - self._spent)
        if self._cap is not None:
            left = min(left, max(0.0, self._cap - time.monotonic()))
        return left

    def hurry(self) -> None:
        """A signal arrived: the ledger gets at most ``HURRY_S`` more, then the outbox."""
        cap = time.monotonic() + HURRY_S
        self._cap = cap if self._cap is None else min(self._cap, cap)

    def bounded(self, fn: Callable[[], T], what: str = "answer") -> T:
        """``fn()`` (a call into the database) from synchronous code, within what is left of
        the deadline; its time counts. Raises :class:`LedgerLate` past it (the thread is
        abandoned) and whatever ``fn`` raises."""
        from orchestrator import tool_thread

        left = self.left()
        if left <= 0:
            raise LedgerLate(self._late or f"the ledger's {self.budget_s:g} s are spent")
        start = time.monotonic()
        try:
            return tool_thread.run_blocking(fn, seconds=left)
        except tool_thread.ToolTimeout:
            self._give_up(what)
            raise LedgerLate(self._late) from None
        finally:
            self._spent += time.monotonic() - start

    async def bounded_async(self, fn: Callable[[], T], what: str = "answer") -> T:
        """:meth:`bounded` from async code: the event loop (and its signals) stays free, and
        a cancellation ends the wait at once."""
        from orchestrator import tool_thread

        left = self.left()
        if left <= 0:
            raise LedgerLate(self._late or f"the ledger's {self.budget_s:g} s are spent")
        start = time.monotonic()
        try:
            return await tool_thread.run_until(fn, lambda: start + left)
        except tool_thread.ToolTimeout:
            self._give_up(what)
            raise LedgerLate(self._late) from None
        finally:
            self._spent += time.monotonic() - start

    def _give_up(self, what: str) -> None:
        self._late = f"the ledger did not {what} within the wave's {self.budget_s:g} s"

    # -- opening -----------------------------------------------------------------------------
    def preflight(self) -> LedgerSink:
        """Refuse to start spending on a ledger whose schema needs ``orch ledger upgrade``
        (one line, before any request). One that cannot be reached in time is not refused:
        its rows will wait in the outbox."""
        from orchestrator.errors import OrchError
        from orchestrator.ledger.connection import default_url, missing_sqlite_file
        from orchestrator.ledger.migrate import SchemaOutOfDate

        if missing_sqlite_file(self.url or default_url()):
            return self  # a new ledger is made at head, when a row first needs it
        try:
            self.bounded(self._open, "open")
        except SchemaOutOfDate:
            raise
        except (OrchError, LedgerLate):
            pass
        return self

    @property
    def errors(self) -> list[str]:
        """One line per leg whose row neither the ledger nor any outbox took (a leg writes
        its row after each answer and at its end: the last failure says it)."""
        return list(self._errors.values())

    def _open(self):
        if self._ledger is None:
            from orchestrator.ledger.spend import Ledger

            self._ledger = Ledger(self.url)
        return self._ledger

    # -- appending ---------------------------------------------------------------------------
    async def append(self, row: dict[str, Any]) -> str | None:
        """:meth:`_append`, with the search index told to stand aside meanwhile (a billed
        row never waits for an index write: engine/index_sink.py)."""
        self._appending += 1
        self.rows_idle.clear()
        try:
            return await self._append(row)
        finally:
            self._appending -= 1
            if not self._appending:
                self.rows_idle.set()

    async def _append(self, row: dict[str, Any]) -> str | None:
        """Return once ``row`` is in the ledger (None) or in an outbox (that outbox's path);
        raise :class:`LedgerLost` when neither took it. Rows that arrive while a write is
        under way share the next transaction: 64 legs ending together cost a few thread round
        trips, not 64 queued one behind the other. Cancelled (a signal), the row is still
        journaled before the cancellation goes on."""
        self._pending.append(row)
        try:
            async with self._lock:
                if any(r is row for r in self._pending):  # else a previous holder took it
                    rows, self._pending = self._pending, []
                    await self._deliver(rows)
        except anyio.get_cancelled_exc_class():
            if any(r is row for r in self._pending):  # cancelled while it waited its turn
                self._pending = [r for r in self._pending if r is not row]
                with anyio.CancelScope(shield=True):
                    await self._spool([row], LedgerLate("the wave was interrupted"))
            self._outcome.pop(id(row), None)
            raise
        outcome = self._outcome.pop(id(row), None)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def _deliver(self, rows: list[dict[str, Any]]) -> None:
        """The ledger within what is left of the deadline (a worker thread, abandoned past
        it), the outbox for every row it did not take."""
        from orchestrator import tool_thread

        failed: dict[int, BaseException] = {}
        left = self.left()
        if left <= 0:
            failed = {id(r): LedgerLate(self._late or "the ledger's deadline is spent")
                      for r in rows}
        else:
            start = time.monotonic()
            ends = start + left

            def deadline() -> float:
                return ends if self._cap is None else min(ends, self._cap)

            def polled() -> float:  # looked at again every POLL_S: a signal shortens it
                return min(deadline(), time.monotonic() + POLL_S)

            try:
                # a write under way finishes (a billed answer's row is worth a moment), but
                # within the deadline, and within HURRY_S of a signal
                with anyio.CancelScope(shield=True):
                    failed = await tool_thread.run_until(
                        lambda: self._write(rows, deadline()), polled)
            except tool_thread.ToolTimeout:
                if self._cap is not None and self._cap < ends:
                    self._late = f"the ledger did not answer within {HURRY_S:g} s of a signal"
                else:
                    self._give_up("answer")
                failed = {id(r): LedgerLate(self._late) for r in rows}
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):  # the rows it carried, not lost
                    await self._spool(rows, LedgerLate("the wave was interrupted"))
                raise
            finally:
                self._spent += time.monotonic() - start
        for row in rows:
            if id(row) not in failed:
                self._outcome[id(row)] = None
                self._errors.pop(str(row.get("leg_id")), None)  # a later row holds it all
        late = [r for r in rows if id(r) in failed]
        if late:
            with anyio.CancelScope(shield=True):
                await self._spool(late, None, failed)

    async def _spool(self, rows: list[dict[str, Any]], error: BaseException | None,
                     errors: dict[int, BaseException] | None = None) -> None:
        """Journal ``rows`` in the outbox (a local fsync, on a worker thread)."""
        from orchestrator.ledger import outbox
        from orchestrator.ledger.spend import default_url

        url = self.url or default_url()

        def spool() -> dict[int, Path | OSError]:
            out: dict[int, Path | OSError] = {}
            for row in rows:
                try:
                    out[id(row)] = outbox.append(url, row)
                except OSError as exc:
                    out[id(row)] = exc
            return out

        done = await anyio.to_thread.run_sync(spool)
        for row in rows:
            why = _brief((errors or {}).get(id(row)) or error or LedgerLate("?"))
            self._record(row, done[id(row)], why)

    def _record(self, row: dict[str, Any], where, why: str) -> None:
        leg = str(row.get("leg_id"))
        if isinstance(where, OSError):
            lost = scrub(f"ledger: {why}; outbox: {_brief(where)}")
            if not self._errors:
                from orchestrator.notices import say

                say(f"the spend ledger could not record a row: {lost}", "warning")
            self._errors[leg] = f"{row.get('leg_id')}: {lost}"
            self._outcome[id(row)] = LedgerLost(lost)
            return
        self.outboxed[leg] = str(where)
        self._errors.pop(leg, None)  # a later row holds it all
        self._outcome[id(row)] = scrub(f"{where} ({why})")

    # -- in a worker thread ------------------------------------------------------------------
    def _write(self, rows: list[dict[str, Any]], deadline: float) -> dict[int, BaseException]:
        """Open the ledger (once) and write ``rows`` by ``deadline``; the rows it did not
        take, each with why. Touches nothing the event loop reads: an abandoned call's late
        answer changes nothing."""
        from sqlalchemy import exc as sa_exc

        from orchestrator.errors import OrchError

        try:
            self._open().append_many(rows, deadline=deadline)
            return {}
        except (OrchError, sa_exc.SQLAlchemyError, OSError) as exc:
            return {id(r): exc for r in rows}  # unreachable, locked or full: every row waits
        except Exception as exc:  # a row the ledger refuses: find it, write the others
            if len(rows) == 1:
                return {id(rows[0]): exc}
            failed: dict[int, BaseException] = {}
            for row in rows:
                failed.update(self._write([row], deadline))
            return failed



def _brief(exc: BaseException) -> str:
    return scrub(f"{type(exc).__name__}: {exc}".splitlines()[0])[:300]
