"""A leg's own files: its directory, ``metadata.json`` (rewritten atomically at every change
of state, a step's progress at most every PROGRESS_WRITE_S) and ``conversation.jsonl``
(appended line by line). A write that fails is recorded on the leg (``io_errors``), never
raised: the leg's answer and its ledger row matter more than one of its files.
"""

from __future__ import annotations

import json
import time
from typing import Any

from orchestrator.engine.context import LegContext
from orchestrator.engine.record import now_iso
from orchestrator.security.secrets import scrub
from orchestrator.store import BackgroundWriter, JsonlFile

# A step's progress alone (tokens, steps) reaches metadata.json at most this often; a change
# of status always does at once. Steps of a remote model take seconds, so each is written.
PROGRESS_WRITE_S = 0.5


class LegFiles:
    """The files of one leg (``ctx.dir``), written from what its record holds."""

    def __init__(self, ctx: LegContext) -> None:
        self.ctx = ctx
        self._writer = BackgroundWriter()
        self._conversation = JsonlFile(ctx.dir / "conversation.jsonl")
        self._saved_at = 0.0
        self._dir_made = False

    def make_dir(self) -> None:
        """The leg's own directory, created exclusively (once): two legs never share one."""
        if self._dir_made:
            return
        self._dir_made = True
        try:
            self.ctx.dir.mkdir(parents=True, exist_ok=False)
        except Exception as exc:
            self.io_error("directory", exc)

    def save(self, progress: bool = False) -> None:
        """metadata.json, atomically: a killed run leaves it valid. ``progress`` (a step
        ended, status unchanged) is written if PROGRESS_WRITE_S passed since the last write:
        fast local steps would spend more on the file than on the request. The rename runs in
        order on a worker thread (BackgroundWriter); :meth:`close` waits for it."""
        now = time.monotonic()
        if not progress or now - self._saved_at >= PROGRESS_WRITE_S:
            self._saved_at = now
            self._write_metadata()

    def _write_metadata(self) -> None:
        record = self.ctx.record
        for _ in range(2):
            try:
                self._writer.write_json(self.ctx.dir / "metadata.json", record.to_dict())
                return
            except (TypeError, ValueError, RecursionError) as exc:  # leg.set() of a value
                # JSON cannot hold (a cycle, an object without a text form)
                self.io_error("metadata.json", exc)
                if not unserialisable_extras(record.extra):
                    return
            except Exception as exc:
                self.io_error("metadata.json", exc)
                return

    def io_error(self, what: str, exc: BaseException) -> None:
        """A file (or the ledger) failed this leg: said on the leg, once per kind."""
        error = scrub(f"{what}: {describe(exc)}")
        errors = self.ctx.record.extra.setdefault("io_errors", [])
        if error not in errors and len(errors) < 20:
            errors.append(error)
            from orchestrator.runtime import log

            log().warning("leg_io_error", leg_id=self.ctx.leg_id, error=error)

    def log(self, kind: str, payload: dict[str, Any]) -> None:
        """One line of ``conversation.jsonl``: a request, a response, a tool's result."""
        try:
            self._conversation.append({"type": kind, "at": now_iso(), "step": self.ctx.step,
                                       **payload})
        except Exception as exc:
            self.io_error("conversation.jsonl", exc)

    async def close(self) -> None:
        """The conversation closed and every pending metadata.json write done."""
        try:
            self._conversation.close()
        except Exception as exc:
            self.io_error("conversation.jsonl", exc)
        try:
            await self._writer.drain()
        except Exception as exc:
            self.io_error("metadata.json", exc)


def unserialisable_extras(extra: dict[str, Any]) -> list[str]:
    """Replace each value in ``extra`` that JSON cannot hold by a note saying so; their keys."""
    bad = []
    for key, value in list(extra.items()):
        try:
            json.dumps(value, default=str)
        except (TypeError, ValueError, RecursionError) as exc:
            extra[key] = f"<not serialisable: {type(value).__name__}: {exc}>"
            bad.append(key)
    return bad


def describe(exc: BaseException) -> str:
    """An exception in one line, at most 300 characters (an OSError with its errno and file)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{type(exc).__name__}: [Errno {exc.errno}] {exc.strerror}{where}"
    return (f"{type(exc).__name__}: {exc}".splitlines() or [type(exc).__name__])[0][:300]
