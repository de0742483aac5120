"""The judges' votes of each council run (table ``council_vote``, one row per run × judge ×
finding it was shown): what ``orch council stats --judges`` calibrates judges from (their
agreement with each other, their position bias, their agreement with the final tier). A
leaf of the ledger's modules, like ``council_table.py``, so the outbox replays these rows
without importing the ledger that replays them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from orchestrator.ledger.council_table import take_runs
from orchestrator.ledger.schema import UTCDateTime, stamp, storable, utcnow

VOTES = ("agree", "dispute", "neutral", "none")  # none: shown, not voted on (counts neutral)


class VoteRow(SQLModel, table=True):
    """One judge's vote on one finding of one council run, and where it was shown."""

    __tablename__ = "council_vote"

    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    run_id: str = Field(index=True)
    judge: str = Field(index=True)  # the judge's model
    finding: str  # the run-wide finding id (F1, ...)
    grp: str  # the group it was tiered in (G1, ...)
    position: int  # where the judge's own shuffled view showed it, 0 = first
    shown: int  # how many findings that view showed
    vote: str  # agree | dispute | neutral | none
    tier: str  # the group's final tier
    eligible: bool  # the judge raised none of the group's findings: its vote counted
    user: str | None = None
    host: str | None = None


TABLE: sa.Table = VoteRow.__table__  # type: ignore[attr-defined]
COLUMNS = frozenset(c.name for c in TABLE.columns) - {"id"}


def prepare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the table takes them: checked and stamped with who and where."""
    for row in rows:
        unknown = set(row) - COLUMNS
        if unknown:
            raise ValueError(f"vote row has unknown fields: {', '.join(sorted(unknown))}")
        if row.get("vote") not in VOTES:
            raise ValueError(f"vote row has vote {row.get('vote')!r}")
    return [VoteRow(**{k: storable(v) if isinstance(v, str) else v
                       for k, v in stamp(r).items()}).model_dump(exclude={"id"})
            for r in rows]


def take_journaled(ledger: Any, batches: list[list[dict[str, Any]]]) -> tuple[set[int], int]:
    """The outbox's replay of journaled runs' votes: each run once, whole."""
    return take_runs(ledger, batches, TABLE, prepare)
