"""Appending ledger rows from a running wave: off the event loop, and never fatal.

A failed append is said once on stderr and kept in ``errors`` (the wave records it in
``wave.json``); the run itself goes on.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from orchestrator.secrets import scrub


class LedgerSink:
    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self.errors: list[str] = []
        self._ledger = None
        self._lock = anyio.Lock()
        self._pending: list[dict[str, Any]] = []

    def _open(self):
        if self._ledger is None:
            from orchestrator.ledger import Ledger

            self._ledger = Ledger(self.url)
        return self._ledger

    async def append(self, row: dict[str, Any]) -> None:
        """Return once ``row`` is written or its failure recorded. Rows that arrive while a
        write is under way share the next transaction: 64 legs ending together cost a few
        thread round trips, not 64 queued one behind the other."""
        self._pending.append(row)
        async with self._lock:
            rows, self._pending = self._pending, []
            if rows:  # else the previous holder wrote this row in its batch
                await self._write(rows)

    async def _write(self, rows: list[dict[str, Any]]) -> None:
        try:
            await anyio.to_thread.run_sync(lambda: self._open().append_many(rows))
        except Exception as exc:
            if len(rows) > 1:  # one bad row must not cost the others theirs
                for row in rows:
                    await self._write([row])
                return
            error = scrub(f"{type(exc).__name__}: {exc}".splitlines()[0])
            if not self.errors:
                print(f"orch: warning: the spend ledger could not record a row: {error}",
                      file=sys.stderr)
            self.errors.append(f"{rows[0].get('leg_id')}: {error}")
