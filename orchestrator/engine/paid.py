"""What the record says a wave family's legs were billed, and which of them completed: the
retry's view of :func:`orchestrator.ledger.billed.billed_legs` over every member of the family.

A retry plans from this as well as from ``wave.json``: a crash or a full disk can leave a
wave's files saying ``running`` or ``aborted`` for legs whose answers arrived and were billed
(their rows went to the outbox). ``billed_legs`` reads the ledger and the outbox together and
keeps each leg's furthest row, as the ledger's unique key would.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class Paid:
    """One leg as the ledger and the outbox know it."""

    cost_usd: float = 0.0  # known dollars (unknown costs add nothing: a floor)
    complete: bool = False  # the leg's furthest row says it ended complete
    rows: int = 0


def paid_legs(wave_ids: Iterable[str], url: str | None = None) -> dict[str, Paid]:
    """leg id -> what was paid for it, for every leg of ``wave_ids`` found in the ledger at
    ``url`` (default: the configured one) or in its outbox."""
    from orchestrator.ledger.billed import billed_legs

    paid: dict[str, Paid] = {}
    for wave_id in sorted(set(wave_ids)):
        for leg_id, billed in billed_legs(wave_id, url).items():
            cost = billed.cost_usd
            dollars = float(cost) if isinstance(cost, int | float) and cost > 0 else 0.0
            paid[leg_id] = Paid(cost_usd=dollars, complete=billed.complete, rows=1)
    return paid
