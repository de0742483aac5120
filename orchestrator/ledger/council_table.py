"""The council table (one row per run × model) and how rows go into it: a leaf of the
ledger's modules, so the outbox replays council rows without importing the ledger that
replays it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from orchestrator.ledger.schema import UTCDateTime, stamp, storable, utcnow


class CouncilRow(SQLModel, table=True):
    """How one model did in one council run, as a seat or as the chair."""

    __tablename__ = "council"

    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    run_id: str = Field(index=True)
    model: str = Field(index=True)
    role: str  # seat | chair
    status: str  # seat: reviewed | lost; chair: verdict | no-verdict | failed
    reviewed: bool = False
    conformed: bool | None = None  # seats: the findings block was readable (maybe repaired)
    cut: bool = False
    findings_blocker: int = 0
    findings_major: int = 0
    findings_minor: int = 0
    findings_nit: int = 0
    confirmed: int = 0
    street_cred: float | None = None  # 0..1 from peers, 1 = first for every peer; None: unranked
    verdict: str | None = None  # chair rows
    user: str | None = None  # ORCH_USER, else the OS user (as in the spend table)
    host: str | None = None


TABLE: sa.Table = CouncilRow.__table__  # type: ignore[attr-defined]
COLUMNS = frozenset(c.name for c in TABLE.columns) - {"id"}


def prepare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the table takes them: checked, stamped with who and where, the verdict
    scrubbed. Done before a write is tried, so the outbox holds exactly what was meant."""
    for row in rows:
        unknown = set(row) - COLUMNS
        if unknown:
            raise ValueError(f"council row has unknown fields: {', '.join(sorted(unknown))}")
    from orchestrator.security.secrets import scrub

    return [CouncilRow(**{k: storable(scrub(v) if k == "verdict" else v)
                          if isinstance(v, str) else v
                          for k, v in stamp(r).items()}).model_dump(exclude={"id"})
            for r in rows]


def take_journaled(ledger: Any, batches: list[list[dict[str, Any]]]) -> tuple[set[int], int]:
    """Replay of journaled runs (:mod:`orchestrator.ledger.outbox`): each batch is one run's rows,
    inserted in one transaction unless the table already holds that run (a replay killed
    after its insert). The indexes of the batches now in the table, and the rows added; a
    batch the ledger refuses stays out (and in the journal)."""
    return take_runs(ledger, batches, TABLE, prepare)


def take_runs(ledger: Any, batches: list[list[dict[str, Any]]], table: sa.Table,
              prepared: Any) -> tuple[set[int], int]:
    """:func:`take_journaled` for any table of rows keyed by ``run_id`` (the council's and
    its judges' votes, ``vote_table.py``): a run goes in once, whole."""
    import time

    deadline = time.monotonic() + 2.0  # a replay never holds a command up for long
    done, added = set(), 0
    for n, batch in enumerate(batches):
        runs = {r.get("run_id") for r in batch}
        try:
            with ledger.engine.begin() as conn:
                ledger.bound(conn, deadline)
                present = conn.execute(sa.select(table.c.run_id).where(
                    table.c.run_id.in_(runs)).limit(1)).first()
                if present is None:
                    conn.execute(sa.insert(table), prepared(batch))
        except (sa.exc.SQLAlchemyError, ValueError, TypeError):
            continue
        done.add(n)
        added += 0 if present is not None else len(batch)
    return done, added
