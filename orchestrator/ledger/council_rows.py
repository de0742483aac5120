"""The council ledger: one row per run × model in the spend ledger's database (table
``council``, created and versioned by the ledger's migrations), so ``orch council stats`` can
show each model's track record across runs and the chair walk can promote the non-seat model
with the best street-cred."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import sqlalchemy as sa

# The table and its rows live in a leaf module the outbox can import without a circle.
from orchestrator.ledger.council_table import (  # noqa: F401 - the names callers import from here
    COLUMNS,
    TABLE,
    CouncilRow,
    prepare,
    take_journaled,
)
from orchestrator.ledger.spend import Ledger

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


class CouncilLedger:
    """The ``council`` table, on the same engine (same URL) as the spend ledger."""

    def __init__(self, url: str | None = None) -> None:
        self.spend = Ledger(url)  # its migrations own the council table too
        self.engine = self.spend.engine

    def append(self, rows: list[dict[str, Any]], *, deadline: float | None = None,
               votes: list[dict[str, Any]] = ()) -> None:
        """One run's rows, and its judges' ``votes``, in one transaction; ``deadline``
        (``time.monotonic()``) bounds the lock wait, as for spend rows."""
        from orchestrator.ledger import vote_table

        prepared, ballots = prepare(rows), vote_table.prepare(list(votes))
        if not prepared and not ballots:
            return
        with self.engine.begin() as conn:
            self.spend.bound(conn, deadline)
            if prepared:
                conn.execute(sa.insert(TABLE), prepared)
            if ballots:
                conn.execute(sa.insert(vote_table.TABLE), ballots)

    def votes(self) -> list[dict[str, Any]]:
        """Every judge's vote the ledger holds, run by run (``orch council stats --judges``)."""
        from orchestrator.ledger.vote_table import TABLE as VOTES

        query = sa.select(VOTES).order_by(VOTES.c.run_id, VOTES.c.judge, VOTES.c.position)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

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
