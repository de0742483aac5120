"""What was billed, per leg of a wave, as the durable record says: the ledger's rows and the
outbox lines waiting for it. A crash can leave ``wave.json`` and ``metadata.json`` behind
the money; this is the record they are repaired from (engine/rebuild.py) and retries plan
from (engine/retry.py).

A leg's durable row is made at its first billed answer and moved forward in place
(``ledger.py``): while the leg runs it says ``aborted`` with :data:`IN_FLIGHT` and what was
billed so far, so after a ``kill -9`` it is already true; the leg's end replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.ledger.in_flight import IN_FLIGHT
from orchestrator.request import Usage


@dataclass(frozen=True)
class Billed:
    """One leg as the record has it."""

    leg_id: str
    kind: str
    model: str
    provider: str
    status: str  # complete | error | refused | aborted (in flight when the process died)
    reason: str | None
    seq: int | None  # billed requests the row holds; None: a row written whole (pre-0003)
    usage: Usage
    cost_usd: float | None
    cost_source: str
    where: str  # "ledger" or "outbox"
    cost_bound_usd: float | None = None  # the most it can have cost: some cost was not read

    @property
    def held_usd(self) -> float:
        """What the leg holds against a ceiling: its bound when some answer's cost was not
        read (each such answer at its claim), else its known cost (unknown: nothing)."""
        if self.cost_bound_usd is not None:
            return float(self.cost_bound_usd)
        return float(self.cost_usd) if isinstance(self.cost_usd, int | float) else 0.0

    @property
    def ended(self) -> bool:
        """The leg's own end was recorded (not a row in flight its process never finished)."""
        return self.reason != IN_FLIGHT

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def _rank(self) -> tuple[int, bool]:
        return (self.seq or 0, self.ended)


def billed_legs(wave_id: str, url: str | None = None) -> dict[str, Billed]:
    """leg_id -> what the ledger and its outbox say that leg was billed, and whether it
    completed. The furthest row of each leg wins (more billed requests, then ended over in
    flight), as the ledger's unique key would keep it. Reading never creates a ledger, and a
    ledger that cannot be opened leaves the outbox's lines as the record."""
    return billed_waves(wave_id, url, exact=True).get(wave_id, {})


def billed_waves(prefix: str, url: str | None = None, *, exact: bool = False,
                 waves: frozenset[str] | None = None, strict: bool = False,
                 ledger: bool = True) -> dict[str, dict[str, Billed]]:
    """wave_id -> its legs as :func:`billed_legs` has them, for every wave whose id starts
    with ``prefix`` (a bench's waves: ``<bench id>-``), read in one pass; ``exact``: the
    one wave ``prefix`` names; ``waves``: these waves as well. ``strict``: a ledger that
    cannot be opened raises (an account must not read it as nothing spent); ``ledger``
    False: the outbox alone (the ledger did not answer in time)."""
    from orchestrator.errors import OrchError
    from orchestrator.ledger import outbox
    from orchestrator.ledger.connection import default_url, missing_sqlite_file

    url = url or default_url()
    waves = frozenset(waves or ())

    def wanted(wave_id: Any) -> bool:
        wave_id = str(wave_id or "")
        return wave_id in waves or (wave_id == prefix if exact else
                                    bool(prefix) and wave_id.startswith(prefix))

    rows: list[tuple[dict[str, Any], str]] = []
    if ledger and not missing_sqlite_file(url):
        try:
            from orchestrator.ledger.spend import Ledger

            ledger = Ledger(url)  # opening replays the outbox into it
            found = ledger.rows(wave_id=prefix) if exact else \
                ledger.rows(wave_prefix=prefix) if prefix else []
            found += ledger.rows(wave_ids=waves) if waves else []
            rows += [(r, "ledger") for r in found]
        except OrchError:
            if strict:
                raise
    rows += [(r, "outbox") for r in outbox.journaled(url) if wanted(r.get("wave_id"))]
    waves: dict[str, dict[str, Billed]] = {}
    for row, where in rows:
        billed = _billed(row, where)
        if billed is None:
            continue
        legs = waves.setdefault(str(row.get("wave_id")), {})
        held = legs.get(billed.leg_id)
        if held is None or billed._rank() > held._rank():
            legs[billed.leg_id] = billed
    return waves


def _billed(row: dict[str, Any], where: str) -> Billed | None:
    try:
        usage = Usage(*(int(row.get(n) or 0) for n in (
            "input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")))
        seq = row.get("seq")
        return Billed(leg_id=str(row["leg_id"]), kind=str(row.get("kind") or "leg"),
                      model=str(row.get("model") or ""),
                      provider=str(row.get("provider") or ""), status=str(row.get("status")),
                      reason=row.get("reason"), seq=None if seq is None else int(seq),
                      usage=usage, cost_usd=row.get("cost_usd"),
                      cost_source=str(row.get("cost_source") or "unknown"), where=where,
                      cost_bound_usd=row.get("cost_bound_usd"))
    except (KeyError, TypeError, ValueError):
        return None  # a line a person must look at; the ledger's replay keeps it
