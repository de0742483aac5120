"""The spend page's numbers: :meth:`Ledger.rollup` (the ``orch spend --json`` contract) and the
day-by-group series. Read-only: a SQLite ledger that does not exist is no spend (and is not
created), and rows waiting in the outbox are not replayed from here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

EMPTY = {"legs": 0, "total_cost_usd": 0.0, "unknown_cost_legs": 0, "failed_cost_usd": 0.0,
         "suspect_legs": 0, "suspect_cost_usd": 0.0, "groups": []}


def _ledger():
    from orchestrator.ledger.connection import default_url, missing_sqlite_file
    from orchestrator.ledger.spend import Ledger

    if missing_sqlite_file(default_url()) is not None:
        return None
    return Ledger(replay=False)


def rollup(since: datetime | None, by: str) -> dict[str, Any]:
    """Totals and one group per ``by`` key; ``provider`` folds the model groups."""
    from orchestrator.ledger.spend_series import provider_of

    ledger = _ledger()
    if ledger is None:
        return {**EMPTY, "location": "no ledger yet"}
    data = ledger.rollup(since=since, group_by="model" if by == "provider" else by)
    if by == "provider":
        folded: dict[str, dict[str, Any]] = {}
        for g in data["groups"]:
            key = provider_of(g["key"])
            into = folded.setdefault(key, {k: 0 for k in g} | {"key": key})
            for k, v in g.items():
                if k != "key":
                    into[k] += v
        data["groups"] = sorted(folded.values(), key=lambda g: -g["cost_usd"])
    data["location"] = ledger.location
    return data


def series(since: datetime | None, by: str) -> list[dict[str, Any]]:
    from orchestrator.ledger.spend_series import daily

    ledger = _ledger()
    return [] if ledger is None else daily(ledger, since, by)
