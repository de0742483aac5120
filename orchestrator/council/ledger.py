"""The council ledger: one row per run × model in the spend ledger's database (table
``council``, created and versioned by the ledger's migrations), so ``orch council stats`` can
show each model's track record across runs and the chair walk can promote the non-seat model
with the best street-cred."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from orchestrator.ledger import Ledger, UTCDateTime, stamp, storable, utcnow


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


MIN_RUNS_FOR_INTERVAL = 5
# Student's t, two-sided 95%, by degrees of freedom (4..30); beyond 30 the normal 1.96.
_T95 = {4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201,
        12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101,
        19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042}


def interval95(values: list[float]) -> list[float] | None:
    """A 95% t-interval for the mean street-cred, clipped to 0..1; None under 5 runs (too
    few for an interval that means anything)."""
    n = len(values)
    if n < MIN_RUNS_FOR_INTERVAL:
        return None
    import statistics

    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = _T95.get(n - 1, 1.96) * sd / n ** 0.5
    return [round(max(0.0, mean - half), 3), round(min(1.0, mean + half), 3)]


def prepare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the table takes them: checked, stamped with who and where, the verdict
    scrubbed. Done before a write is tried, so the outbox holds exactly what was meant."""
    for row in rows:
        unknown = set(row) - COLUMNS
        if unknown:
            raise ValueError(f"council row has unknown fields: {', '.join(sorted(unknown))}")
    from orchestrator.secrets import scrub

    return [CouncilRow(**{k: storable(scrub(v) if k == "verdict" else v)
                          if isinstance(v, str) else v
                          for k, v in stamp(r).items()}).model_dump(exclude={"id"})
            for r in rows]


def take_journaled(ledger: Ledger, batches: list[list[dict[str, Any]]]) -> tuple[set[int], int]:
    """Replay of journaled runs (:mod:`orchestrator.outbox`): each batch is one run's rows,
    inserted in one transaction unless the table already holds that run (a replay killed
    after its insert). The indexes of the batches now in the table, and the rows added; a
    batch the ledger refuses stays out (and in the journal)."""
    import time

    deadline = time.monotonic() + 2.0  # a replay never holds a command up for long
    done, added = set(), 0
    for n, batch in enumerate(batches):
        runs = {r.get("run_id") for r in batch}
        try:
            with ledger.engine.begin() as conn:
                ledger.bound(conn, deadline)
                present = conn.execute(sa.select(TABLE.c.run_id).where(
                    TABLE.c.run_id.in_(runs)).limit(1)).first()
                if present is None:
                    conn.execute(sa.insert(TABLE), prepare(batch))
        except (sa.exc.SQLAlchemyError, ValueError, TypeError):
            continue
        done.add(n)
        added += 0 if present is not None else len(batch)
    return done, added


class CouncilLedger:
    """The ``council`` table, on the same engine (same URL) as the spend ledger."""

    def __init__(self, url: str | None = None) -> None:
        self.spend = Ledger(url)  # its migrations own the council table too
        self.engine = self.spend.engine

    def append(self, rows: list[dict[str, Any]], *, deadline: float | None = None) -> None:
        """One run's rows in one transaction; ``deadline`` (``time.monotonic()``) bounds
        the lock wait, as for spend rows."""
        prepared = prepare(rows)
        if not prepared:
            return
        with self.engine.begin() as conn:
            self.spend.bound(conn, deadline)
            conn.execute(sa.insert(TABLE), prepared)

    def rows(self, run_id: str | None = None) -> list[dict[str, Any]]:
        query = sa.select(TABLE).order_by(TABLE.c.ts, TABLE.c.id)
        if run_id is not None:
            query = query.where(TABLE.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def stats(self) -> list[dict[str, Any]]:
        """Each model's track record, best street-cred first (models never ranked last)."""
        acc: dict[str, dict[str, Any]] = defaultdict(lambda: {
            "runs": set(), "seat_runs": 0, "chair_runs": 0, "reviewed": 0, "lost": 0,
            "conformed": 0, "cut": 0, "findings": {"blocker": 0, "major": 0, "minor": 0,
                                                   "nit": 0},
            "confirmed": 0, "creds": [], "verdicts": 0, "chair_failed": 0})
        for r in self.rows():
            a = acc[r["model"]]
            a["runs"].add(r["run_id"])
            if r["role"] == "seat":
                a["seat_runs"] += 1
                a["reviewed" if r["reviewed"] else "lost"] += 1
                a["conformed"] += bool(r["conformed"])
                a["cut"] += bool(r["cut"])
                for s in a["findings"]:
                    a["findings"][s] += r[f"findings_{s}"] or 0
                a["confirmed"] += r["confirmed"] or 0
                # a value above 1 is an old mean rank (before 0..1 scores): not comparable
                if r["street_cred"] is not None and 0 <= r["street_cred"] <= 1:
                    a["creds"].append(r["street_cred"])
            else:
                a["chair_runs"] += 1
                a["verdicts"] += r["verdict"] is not None
                a["chair_failed"] += r["status"] == "failed"
        out = []
        for model, a in acc.items():
            raised = sum(a["findings"].values())
            creds = a.pop("creds")
            out.append({
                "model": model, **a, "runs": len(a["runs"]), "raised": raised,
                "confirmed_rate": round(a["confirmed"] / raised, 3) if raised else None,
                "conformed_rate": (round(a["conformed"] / a["reviewed"], 3)
                                   if a["reviewed"] else None),
                "street_cred": round(sum(creds) / len(creds), 3) if creds else None,
                "ranked_runs": len(creds),
                "street_cred_ci95": interval95(creds),
            })
        out.sort(key=lambda s: (s["street_cred"] is None, -(s["street_cred"] or 0),
                                -s["ranked_runs"], s["model"]))
        return out

    def best_street_cred(self, exclude: set[str]) -> list[str]:
        """Models with a street-cred, best first, leaving out ``exclude`` (by base name)."""
        return [s["model"] for s in self.stats()
                if s["street_cred"] is not None
                and s["model"].split("@", 1)[0] not in exclude and s["model"] not in exclude]
