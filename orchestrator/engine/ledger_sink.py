"""Appending ledger rows from a running wave: off the event loop, bounded, and never lost.

The ledger gets ``BUDGET_S`` seconds in total per wave (lock waits, retries, slow disks),
not per row: past that, or when a write fails, the rows go to the outbox journal
(:mod:`orchestrator.ledger.outbox`), fsync'd, and the next command that opens the ledger replays
them. Only when no outbox location takes a row either is it an error: said once on stderr,
kept in ``errors`` (``wave.json``'s ``ledger_errors``) and raised to the leg, which records it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from orchestrator.security.secrets import scrub

BUDGET_S = 30.0  # the ledger's total wait per wave before rows go to the outbox


class LedgerLost(Exception):  # noqa: N818 - what happened to the row, not a crash
    """Neither the ledger nor any outbox took a row."""


class LedgerSink:
    def __init__(self, url: str | None = None, *, budget_s: float | None = None) -> None:
        self.url = url
        self._errors: dict[str, str] = {}  # leg_id -> why its row is lost (the latest)
        self.outboxed: dict[str, str] = {}  # leg_id -> the outbox that holds its row
        self.budget_s = BUDGET_S if budget_s is None else budget_s
        self._spent = 0.0
        self._ledger = None
        self._lock = anyio.Lock()
        self._pending: list[dict[str, Any]] = []
        self._outcome: dict[int, BaseException | str | None] = {}

    def preflight(self) -> LedgerSink:
        """Refuse to start spending on a ledger whose schema needs ``orch ledger upgrade``
        (one line, before any request). One that cannot be reached is not refused: its rows
        will wait in the outbox."""
        from orchestrator.errors import OrchError
        from orchestrator.ledger.connection import default_url, missing_sqlite_file
        from orchestrator.ledger.migrate import SchemaOutOfDate

        if missing_sqlite_file(self.url or default_url()):
            return self  # a new ledger is made at head, when a row first needs it
        try:
            self._open()
        except SchemaOutOfDate:
            raise
        except OrchError:
            pass
        return self

    @property
    def errors(self) -> list[str]:
        """One line per leg whose row neither the ledger nor any outbox took (a leg writes
        its row after each answer and at its end: the last failure says it)."""
        return list(self._errors.values())

    def left(self) -> float:
        """Seconds of the ledger's wait this sink has not used (a council's own rows get
        what its stages left)."""
        return max(0.0, self.budget_s - self._spent)

    def _open(self):
        if self._ledger is None:
            from orchestrator.ledger.spend import Ledger

            self._ledger = Ledger(self.url)
        return self._ledger

    async def append(self, row: dict[str, Any]) -> str | None:
        """Return once ``row`` is in the ledger (None) or in an outbox (that outbox's path);
        raise :class:`LedgerLost` when neither took it. Rows that arrive while a write is
        under way share the next transaction: 64 legs ending together cost a few thread round
        trips, not 64 queued one behind the other."""
        self._pending.append(row)
        async with self._lock:
            rows, self._pending = self._pending, []
            if rows:  # else the previous holder wrote this row in its batch
                await anyio.to_thread.run_sync(self._write, rows)
        outcome = self._outcome.pop(id(row), None)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    # -- in a worker thread ----------------------------------------------------------------
    def _write(self, rows: list[dict[str, Any]]) -> None:
        start = time.monotonic()
        try:
            self._try(rows, start + max(0.0, self.budget_s - self._spent))
        finally:
            self._spent += time.monotonic() - start

    def _try(self, rows: list[dict[str, Any]], deadline: float) -> None:
        from sqlalchemy import exc as sa_exc

        from orchestrator.errors import OrchError

        try:
            self._open().append_many(rows, deadline=deadline)
            for row in rows:
                self._outcome[id(row)] = None
                self._errors.pop(str(row.get("leg_id")), None)  # a later row holds it all
            return
        except (OrchError, sa_exc.SQLAlchemyError, OSError) as exc:
            error = exc  # the ledger is unreachable, locked or full: every row waits
        except Exception as exc:  # a row the ledger refuses: find it, write the others
            if len(rows) > 1:
                for row in rows:
                    self._try([row], deadline)
                return
            error = exc
        for row in rows:
            self._to_outbox(row, error)

    def _to_outbox(self, row: dict[str, Any], error: BaseException) -> None:
        from orchestrator.ledger import outbox
        from orchestrator.ledger.spend import default_url

        why = _brief(error)
        try:
            path = outbox.append(self.url or default_url(), row)
        except OSError as exc:
            lost = scrub(f"ledger: {why}; outbox: {_brief(exc)}")
            if not self._errors:
                from orchestrator.notices import say

                say(f"the spend ledger could not record a row: {lost}", "warning")
            self._errors[str(row.get("leg_id"))] = f"{row.get('leg_id')}: {lost}"
            self._outcome[id(row)] = LedgerLost(lost)
            return
        self.outboxed[str(row.get("leg_id"))] = str(path)
        self._errors.pop(str(row.get("leg_id")), None)  # a later row holds it all
        self._outcome[id(row)] = scrub(f"{path} ({why})")


def _brief(exc: BaseException) -> str:
    return scrub(f"{type(exc).__name__}: {exc}".splitlines()[0])[:300]
