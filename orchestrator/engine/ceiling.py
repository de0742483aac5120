"""What a wave's budgets make of its exit code: work a budget stopped is never a clean run.

A leg that ended on a budget (``finished: false``), a launch a ``before_launch`` hook refused
(``budget_refusals``), a cost ceiling (``options.max_cost``) over a total that is only a
floor (some leg's cost unknown), or known spend past the ceiling (``over_ceiling_usd``) each
make the wave exit 2, even when every leg that ran completed. The reasons are listed in the
wave document's ``degraded``.
"""

from __future__ import annotations

from typing import Any

from orchestrator.engine.record import LegRecord


def over_ceiling(doc: dict[str, Any]) -> float | None:
    """Dollars of known spend past ``options.max_cost``, or None when within it (or unset)."""
    ceiling = (doc.get("options") or {}).get("max_cost")
    spent = doc.get("cost_usd") or 0.0
    if ceiling is None or spent <= float(ceiling) + 1e-9:
        return None
    return round(spent - float(ceiling), 8)


def degradations(records: list[LegRecord], doc: dict[str, Any]) -> list[str]:
    reasons = []
    unfinished = [r.leg_id for r in records if r.extra.get("finished") is False]
    if unfinished:
        reasons.append(f"stopped on a budget before finishing: {', '.join(unfinished)}")
    refusals = doc.get("budget_refusals") or []
    if refusals:
        reasons.append(f"{len(refusals)} launch(es) refused by a budget")
    ceiling = (doc.get("options") or {}).get("max_cost")
    if ceiling is not None and not doc.get("cost_exact", True):
        unknown = sum(1 for r in records if r.cost_usd is None)
        reasons.append(f"cost ceiling ${ceiling:g} set but {unknown} leg(s)' cost is unknown: "
                       f"the total ${doc.get('cost_usd', 0):.4f} is a floor")
    over = doc.get("over_ceiling_usd")
    if over:
        reasons.append(f"known spend ${doc.get('cost_usd', 0):.4f} passed the cost ceiling "
                       f"${ceiling:g} by ${over:.4f}")
    return reasons
