"""The search index's writes from a running wave: never in a billed row's way, bounded, and
kept in the index journal when the index is slow.

A leg hands its doc over (:meth:`IndexSink.add`) only once its final ledger row is in the
ledger or the outbox, and the hand-over is a list append: the leg does not wait. One writer
on a daemon worker thread (``tool_thread.background``, so an exit never cuts it mid-call)
admits each doc (:func:`orchestrator.ledger.search_table.admitted`: key values masked,
credential content withheld) and writes a few at a time in transactions of their own,
bounded by ``WRITE_S`` (SQLite's busy timeout, PostgreSQL's statement timeout); it never
takes the spend ledger's lock or its deadline, and it stands aside while a billed row is on
its way (the sink's ``rows_idle``), so the row never waits for the index's admission or its
transaction. A doc the index refuses goes to the index journal
(:func:`orchestrator.ledger.outbox.append_index`), replayed by the next open.

A wave's end waits for its docs (:meth:`IndexSink.settle`) at most ``ORCH_INDEX_WAIT_S``
(``WAIT_S``), after a signal ``HURRY_S``; what is not written by then is journaled and the
index is given up for the rest of the run (later waves do not wait again). A doc neither
the index nor the journal took is only missing from search: the answer is in its leg's
folder and ``orch runs search --reindex`` puts it back.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import anyio

WAIT_S = 2.0  # the most a wave's end waits for the index
WAIT_ENV = "ORCH_INDEX_WAIT_S"
HURRY_S = 0.2  # after a signal
WRITE_S = 2.0  # one write's own bound
CHUNK = 4  # docs per transaction
_PROMPTS = 8  # admitted prompts remembered (a run's waves share one)


def wait_s() -> float:
    text = os.environ.get(WAIT_ENV, "").strip()
    try:
        value = float(text) if text else WAIT_S
    except ValueError:
        return WAIT_S
    return value if math.isfinite(value) and value >= 0 else WAIT_S


class IndexSink:
    """The index writer of one spend ledger sink (a run's waves share it)."""

    def __init__(self, url: str | None = None, *,
                 rows_idle: threading.Event | None = None) -> None:
        self.url = url
        self._rows_idle = rows_idle  # set while no billed row is on its way: then we write
        self._cv = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._writing: list[dict[str, Any]] = []
        self._running = False
        self._late: str | None = None  # why the index was given up for this run
        self._ledger = None
        self._prompts: dict[str, str] = {}
        self.written = 0
        self.journaled = 0
        self.lost: list[str] = []  # why docs were left out of the index and the journal
        self._said = False

    # -- on the event loop -------------------------------------------------------------------
    def add(self, **fields: Any) -> None:
        """A leg's doc (:func:`~orchestrator.ledger.search_table.admitted`'s arguments):
        queued for the writer; returns at once."""
        from orchestrator import tool_thread

        with self._cv:
            self._queue.append(fields)
            if self._running:
                return
            self._running = True
        tool_thread.background(self._drain)

    async def settle(self, *, hurry: bool = False) -> None:
        """Return once every doc handed over is in the index, or journaled: a stalled index
        costs the run at most one wait."""
        wait = 0.0 if self._late else (HURRY_S if hurry else wait_s())
        with anyio.CancelScope(shield=True):  # bounded: a signal's exit still waits less
            if wait <= 0 or not await anyio.to_thread.run_sync(self._idle, wait,
                                                               abandon_on_cancel=True):
                with self._cv:
                    left = self._queue + self._writing
                    self._queue = []
                if left:
                    if not self._late:
                        self._late = f"the search index did not answer within {wait:g} s"
                    await anyio.to_thread.run_sync(self._journal, left, self._late)
        if self.lost and not self._said:
            self._said = True
            from orchestrator.runtime import log

            log().warning("search_index_incomplete", docs_lost=len(self.lost),
                          first=self.lost[0], fix="orch runs search --reindex")

    # -- on worker threads -------------------------------------------------------------------
    def _idle(self, seconds: float) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._writing,
                                     timeout=seconds)

    def _drain(self) -> None:
        while True:
            with self._cv:
                if not self._queue:
                    self._running = False
                    self._cv.notify_all()
                    return
                batch, self._queue = self._queue, []
                self._writing = batch
            try:
                self._write(batch)
            finally:
                with self._cv:
                    self._writing = []
                    self._cv.notify_all()

    def _stand_aside(self) -> None:
        """Wait (at most ``WRITE_S``) while a billed row is on its way to the ledger: the
        index's admission and its transaction never take the row's turn (the GIL, SQLite's
        one writer)."""
        if self._rows_idle is not None:
            self._rows_idle.wait(WRITE_S)

    def _docs(self, batch: list[dict[str, Any]], *, aside: bool = True) -> list:
        """Each doc admitted; ``aside``: a billed row on its way goes first (not when a
        wave's end is journaling what is left: the rows are done, the wait is bounded)."""
        from orchestrator.ledger.search_table import PROMPT_CHARS, admitted, indexable

        docs = []
        for fields in batch:
            if aside:
                self._stand_aside()
            prompt = fields.get("prompt") or ""
            done = self._prompts.get(prompt)
            if done is None:
                done = indexable(prompt, PROMPT_CHARS)
                if len(self._prompts) >= _PROMPTS:
                    self._prompts.clear()
                self._prompts[prompt] = done
            try:
                docs.append(admitted(**{**fields, "prompt": None}, prompt_admitted=done))
            except (TypeError, ValueError) as exc:
                self.lost.append(f"{fields.get('leg_id')}: {exc}")
        return docs

    def _write(self, batch: list[dict[str, Any]]) -> None:
        from orchestrator.ledger.search_table import put

        try:
            docs = self._docs(batch)
        except Exception as exc:  # noqa: BLE001 - never into the wave: said, then dropped
            self.lost.append(f"{len(batch)} doc(s): {type(exc).__name__}: {exc}")
            return
        for at in range(0, len(docs), CHUNK):  # short transactions: a row's wait stays short
            chunk = docs[at:at + CHUNK]
            self._stand_aside()
            try:
                ledger = self._open()
                with ledger.engine.begin() as conn:
                    ledger.bound(conn, time.monotonic() + WRITE_S)
                    self.written += put(conn, chunk)
            except Exception as exc:  # noqa: BLE001 - locked, down, refused: journaled
                self._spool(docs[at:], f"{type(exc).__name__}: {exc}".splitlines()[0])
                return

    def _open(self):
        if self._ledger is None:
            from orchestrator.ledger.spend import Ledger

            self._ledger = Ledger(self.url, replay=False)
        return self._ledger

    def _journal(self, batch: list[dict[str, Any]], why: str) -> None:
        try:
            docs = self._docs(batch, aside=False)
        except Exception as exc:  # noqa: BLE001
            self.lost.append(f"{len(batch)} doc(s): {type(exc).__name__}: {exc}")
            return
        self._spool(docs, why)

    def _spool(self, docs: list, why: str) -> None:
        from orchestrator.ledger import outbox
        from orchestrator.ledger.connection import default_url
        from orchestrator.security.secrets import scrub

        if not docs:
            return
        try:
            outbox.append_index(self.url or default_url(), [d.to_dict() for d in docs])
            self.journaled += len(docs)
        except OSError as exc:
            self.lost.append(scrub(f"{len(docs)} doc(s): index: {why}; journal: {exc}")[:300])
