"""What the durable record holds against a run's ceiling before this process spends: the
ledger's rows (and its outbox's) of the run's waves, and the requests a killed process left
in flight (the request journal).

Each leg holds its known cost, or its bound when some answer's cost could not be read (each
such answer at the worst case it was sent with: unknown is not zero); each request in
flight at a kill holds its claim. A leg whose cost is unknown and unbounded (no price) holds
nothing and is counted, so the account can say its total is a floor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.account.journal import InFlight


@dataclass
class Held:
    unreadable: str | None = None  # why the ledger itself could not be read, if it was not
    known_usd: float = 0.0  # known costs
    bound_usd: float = 0.0  # beyond them: claims kept for answers whose cost was not read
    unknown_legs: int = 0  # legs whose cost is unknown with no bound (no price)
    legs: int = 0
    in_flight: list[InFlight] = field(default_factory=list)

    @property
    def in_flight_usd(self) -> float:
        return sum(e.claim_usd or 0.0 for e in self.in_flight)

    @property
    def total(self) -> float:
        """Everything held: what the ceiling has already lost."""
        return round(self.known_usd + self.bound_usd + self.in_flight_usd, 10)

    def to_dict(self) -> dict[str, Any]:
        return {"known_usd": round(self.known_usd, 8), "bound_usd": round(self.bound_usd, 8),
                "in_flight_usd": round(self.in_flight_usd, 8), "legs": self.legs,
                "unknown_legs": self.unknown_legs, "total_usd": round(self.total, 8),
                "in_flight": [e.to_dict() for e in self.in_flight]}


def read(url: str | None = None, *, run_id: str | None = None, waves: Iterable[str] = (),
         files: dict[str, float] | None = None, skip_providers: tuple[str, ...] = (),
         ledger: bool = True) -> Held:
    """What the record holds for ``run_id`` (its own waves: the id itself and every wave id
    that starts with ``<run_id>-``) and for ``waves``. ``files``: leg id -> the cost the
    run's own files say (a row no ledger nor outbox took is still there), kept where it is
    more. ``skip_providers``: rows not under the ceiling (a bench's command contestants).
    A ledger that cannot be read (or ``ledger`` False: it did not answer in time) leaves the
    outbox, the journal and ``files`` as the record, and ``unreadable`` says why; every
    journaled request its rows might have settled then counts as in flight (more, never
    less)."""
    from orchestrator.errors import OrchError
    from orchestrator.ledger.billed import billed_waves

    exact = frozenset([*waves, *([run_id] if run_id else [])])
    prefix = f"{run_id}-" if run_id else ""
    held = Held()
    try:
        if not ledger:
            raise OrchError("it did not answer in time")
        found = billed_waves(prefix, url, waves=exact, strict=True)
    except OrchError as exc:
        held.unreadable = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        found = billed_waves(prefix, url, waves=exact, ledger=False)
    seen: set[str] = set()
    for legs in found.values():
        for leg_id, billed in legs.items():
            if billed.provider in skip_providers:
                continue
            seen.add(leg_id)
            held.legs += 1
            cost = billed.cost_usd if isinstance(billed.cost_usd, int | float) else None
            mine = (files or {}).get(leg_id)
            if billed.cost_bound_usd is not None:
                held.known_usd += cost or 0.0
                held.bound_usd += max(0.0, billed.held_usd - (cost or 0.0))
            elif cost is None and not mine:
                held.unknown_legs += 1
            else:
                held.known_usd += max(cost or 0.0, mine or 0.0)
    for leg_id, cost in (files or {}).items():  # legs only their files know were paid
        if leg_id not in seen and cost:
            held.known_usd += cost
            held.legs += 1
    if prefix or exact:
        from orchestrator.account import journal

        held.in_flight = journal.unsettled(url, prefix=prefix or None, waves=exact,
                                           ledger=held.unreadable is None)
    return held
