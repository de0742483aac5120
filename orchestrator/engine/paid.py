"""What the record says a wave's legs were billed, and which of them completed: the ledger's
rows and the outbox's waiting lines, read together.

A retry plans from this as well as from ``wave.json``: a crash or a full disk can leave a
wave's files saying ``running`` or ``aborted`` for legs whose answers arrived and were billed
(their rows went to the outbox). A leg's row may be updated in place as its requests are
billed (``seq``): the furthest copy is the leg's total. A row written whole present in both
places (a replay killed between its insert and the journal's rewrite) counts once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orchestrator.engine.record import COMPLETE


@dataclass
class Paid:
    """One leg as the ledger and the outbox know it."""

    cost_usd: float = 0.0  # known dollars (unknown costs add nothing: a floor)
    complete: bool = False  # some row of the leg says it ended complete
    rows: int = 0


def paid_legs(wave_ids: Iterable[str], url: str | None = None) -> dict[str, Paid]:
    """leg id -> what was paid for it, for every leg of ``wave_ids`` found in the ledger at
    ``url`` (default: the configured one) or in its outbox. A ledger that cannot be opened
    is skipped: its outbox still answers."""
    from orchestrator.ledger_engine import default_url

    wanted = set(wave_ids)
    url = url or default_url()
    rows = _ledger_rows(wanted, url) + _outbox_rows(wanted, url)
    by_leg: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if isinstance(row.get("leg_id"), str):
            by_leg.setdefault(row["leg_id"], []).append(row)
    return {leg_id: _leg(leg_rows) for leg_id, leg_rows in by_leg.items()}


def _leg(rows: list[dict[str, Any]]) -> Paid:
    """One leg from its rows. A row with a sequence (``seq``: the leg's billed requests so
    far, its row updated in place as they are billed) holds the leg's running total: the
    furthest one is the truth, the others are earlier copies (an outbox line, the ledger's
    row). Rows without one were written whole, one per leg: each counts once, however many
    places hold it."""
    sequenced = [r for r in rows if isinstance(r.get("seq"), int)]
    if sequenced:
        best = max(sequenced, key=lambda r: (r["seq"], r.get("status") == COMPLETE))
        return Paid(cost_usd=_dollars(best.get("cost_usd")),
                    complete=best.get("status") == COMPLETE, rows=len(rows))
    seen: set[tuple] = set()
    paid = Paid()
    for row in rows:
        key = (_ts(row.get("ts")), row.get("input_tokens"), row.get("output_tokens"),
               row.get("status"))
        if key in seen:
            continue
        seen.add(key)
        paid.rows += 1
        paid.cost_usd += _dollars(row.get("cost_usd"))
        paid.complete = paid.complete or row.get("status") == COMPLETE
    return paid


def _dollars(cost: Any) -> float:
    return float(cost) if isinstance(cost, int | float) and cost > 0 else 0.0


def _ts(value: Any) -> str | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(value, str):
        try:
            return _ts(datetime.fromisoformat(value))
        except ValueError:
            return value
    return None


def _ledger_rows(wave_ids: set[str], url: str) -> list[dict[str, Any]]:
    from orchestrator.errors import OrchError
    from orchestrator.ledger import Ledger
    from orchestrator.ledger_engine import missing_sqlite_file

    if not wave_ids or missing_sqlite_file(url):
        return []
    try:
        ledger = Ledger(url)  # opening replays the outbox: what waited is read from here
    except (OrchError, OSError):
        return []
    try:
        return [r for w in sorted(wave_ids) for r in ledger.rows(wave_id=w)]
    except Exception:  # noqa: BLE001 - an unreadable ledger: the outbox still answers
        return []
    finally:
        ledger.close()


def _outbox_rows(wave_ids: set[str], url: str) -> list[dict[str, Any]]:
    from orchestrator import outbox

    rows = []
    for path in outbox.locations(url):
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                row = json.loads(line).get("row")
            except (ValueError, AttributeError):
                continue  # a torn line, or another table's batch
            if isinstance(row, dict) and row.get("wave_id") in wave_ids:
                rows.append(row)
    return rows
