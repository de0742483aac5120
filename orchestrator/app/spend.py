"""What the spend ledger says was spent, as every face reads it: ``orch spend`` and `orch
mcp`'s spend tool (a missing SQLite file is no spend, never a new database)."""

from __future__ import annotations

from typing import Any

from orchestrator.ledger.spend import Ledger, parse_since


def _since(since_text: str):
    return None if since_text.strip().lower() == "all" else parse_since(since_text)


def spend_json(since_text: str, group_by: str | None) -> dict[str, Any]:
    """The rollup `orch spend --json` prints (and `orch mcp`'s spend tool returns); a missing
    SQLite file reads as no spend and is not created."""
    since = _since(since_text)
    if _missing_sqlite_file() is not None:
        return {"legs": 0, "total_cost_usd": 0.0, "unknown_cost_legs": 0, "failed_cost_usd": 0.0,
                "suspect_legs": 0, "suspect_cost_usd": 0.0, "bounded_legs": 0,
                "bound_cost_usd": 0.0, "groups": [], "in_flight_at_kill": in_flight(since)}
    ledger = Ledger()
    if ledger.replayed:  # rows an earlier command could not write in time (the outbox)
        from orchestrator.notices import say

        say(f"replayed {_count(ledger.replayed, 'row')} from the ledger outbox")
    return {**ledger.rollup(since=since, group_by=group_by),
            "in_flight_at_kill": in_flight(since)}


def in_flight(since) -> dict[str, Any]:
    """Requests a killed orch sent and no row records: "may be billed, at most $X" (the
    request journal, orchestrator/account/journal.py)."""
    from orchestrator.account.journal import at_kill

    found = at_kill(since=since)
    return {k: found[k] for k in ("requests", "at_most_usd", "unpriced")}


def _missing_sqlite_file() -> str | None:
    """The path of a SQLite ledger that does not exist yet, else None."""
    from orchestrator.ledger import outbox
    from orchestrator.ledger.connection import default_url, missing_sqlite_file

    if outbox.pending(default_url()):
        return None  # rows wait to be replayed: the ledger is created to take them
    return missing_sqlite_file(default_url())


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
