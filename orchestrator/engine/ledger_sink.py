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

    def _open(self):
        if self._ledger is None:
            from orchestrator.ledger import Ledger

            self._ledger = Ledger(self.url)
        return self._ledger

    async def append(self, row: dict[str, Any]) -> None:
        try:
            async with self._lock:
                await anyio.to_thread.run_sync(lambda: self._open().append(row))
        except Exception as exc:
            error = scrub(f"{type(exc).__name__}: {exc}".splitlines()[0])
            if not self.errors:
                print(f"orch: warning: the spend ledger could not record a row: {error}",
                      file=sys.stderr)
            self.errors.append(f"{row.get('leg_id')}: {error}")
