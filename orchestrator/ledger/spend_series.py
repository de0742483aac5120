"""Spend over time: one SQL rollup of the ledger by day and by a grouping (model, user...),
the series ``orch ui`` draws. The same table, keys and money rounding as ``orch spend``
(:meth:`orchestrator.ledger.spend.Ledger.rollup`), so a chart never disagrees with the totals."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import sqlalchemy as sa

from orchestrator.ledger.spend import TABLE, Ledger, _as_utc, _group_key, _money

SERIES_BY = ("model", "provider", "user", "host", "kind", "status", "tag")


def provider_of(model: str | None) -> str:
    """``openai/gpt-x`` -> ``openai``: the prefix litellm routes by (none: the model)."""
    return (model or "").split("/", 1)[0] if model and "/" in model else (model or "")


def daily(ledger: Ledger, since: datetime | None, by: str) -> list[dict[str, Any]]:
    """``[{"day", "key", "legs", "cost_usd"}]`` oldest day first; ``by`` is one of SERIES_BY
    (``provider`` folds the model rollup by each model's provider prefix)."""
    if by not in SERIES_BY:
        raise ValueError(f"cannot chart spend by {by!r}; use one of {', '.join(SERIES_BY)}")
    day = _group_key("day").label("day")
    key = _group_key("model" if by == "provider" else by).label("key")
    query = sa.select(day, key, sa.func.count().label("legs"),
                      sa.func.sum(TABLE.c.cost_usd).label("cost_usd")).group_by(day, key)
    if since is not None:
        query = query.where(TABLE.c.ts >= _as_utc(since))
    with ledger.engine.connect() as conn:
        rows = conn.execute(query).all()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        d = r.day.isoformat()[:10] if isinstance(r.day, date | datetime) else str(r.day)
        k = provider_of(r.key) if by == "provider" else ("" if r.key is None else str(r.key))
        cell = out.setdefault((d, k), {"day": d, "key": k, "legs": 0, "cost_usd": 0.0})
        cell["legs"] += int(r.legs or 0)
        cell["cost_usd"] = _money(cell["cost_usd"] + float(r.cost_usd or 0.0))
    return sorted(out.values(), key=lambda c: (c["day"], c["key"]))
