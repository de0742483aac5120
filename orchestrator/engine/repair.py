"""Bringing a dead wave's files up to its durable record.

A leg's ledger row (or its outbox line) is written before the leg moves on; its
``metadata.json`` only at changes of state, and ``wave.json`` at the wave's start and end.
So when the process that ran a wave is gone (``kill -9``, a full disk at the end, a daemon
killed), the record knows more than the files: a leg may show ``running`` with one step
billed while the ledger holds three. Opening such a wave (``orch status``, ``orch runs``,
``--retry-failed``, a daemon's start-up) takes each leg's status, usage and cost from the
record where it is further along, and rewrites the files atomically, once.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.engine.record import ABORTED, RUNNING, LegRecord
from orchestrator.errors import OrchError
from orchestrator.ledger.billed import Billed, billed_legs
from orchestrator.store import write_json_atomic

UNFINISHED = (RUNNING, "pending")


def from_record(wave_id: str, records: dict[str, LegRecord], *, live: bool = False
                ) -> set[str]:
    """Move each leg of ``records`` (leg_id -> record, changed in place; legs only the record
    knows are added) forward to what the ledger and its outbox say it was billed. The ids
    of the legs that changed. ``live``: the wave's process still runs it (a status view):
    the outbox is read, not replayed, and a leg whose row is in flight is still running,
    with what it was billed so far."""
    try:
        billed = billed_legs(wave_id, replay=not live)
    except (OrchError, OSError):  # no record to read: the files are all there is
        return set()
    changed = set()
    for leg_id, row in billed.items():
        record = records.get(leg_id)
        if record is None:
            record = records[leg_id] = LegRecord(leg_id=leg_id, wave_id=wave_id,
                                                 model=row.model, provider=row.provider,
                                                 kind=row.kind, status=RUNNING)
        if _further(row, record):
            _take(record, row, live=live)
            changed.add(leg_id)
    return changed


def _further(row: Billed, record: LegRecord) -> bool:
    ended = record.status not in UNFINISHED
    if row.seq is None:  # a row written whole at the leg's end (an orch before 0003)
        return not ended
    return (row.seq, row.ended) > (record.billed, ended)


def _take(record: LegRecord, row: Billed, *, live: bool = False) -> None:
    record.usage = row.usage
    record.cost_usd = row.cost_usd
    record.cost_source = row.cost_source
    record.billed = row.seq or record.billed
    if live:  # still at work (in flight: billed so far), or ended before its file said so
        record.status, record.reason = (row.status, row.reason) if row.ended else \
            (RUNNING, record.reason)
        return
    record.status = row.status if row.ended else ABORTED
    record.reason = row.reason
    notes = record.notes
    count = "" if row.seq is None else f" ({row.seq} billed request(s))"
    note = f"repaired from the {row.where}{count}: the process ended before its files did"
    if note not in notes:
        notes.append(note)


def write_back(runs_dir: Path, wave_dir: Path, doc: dict, legs: list[LegRecord]) -> None:
    """Each changed leg's metadata.json, then wave.json, atomically; a file that cannot be
    written is left as it was (the next open repairs it again)."""
    for record in legs:
        leg_dir = runs_dir / record.leg_id
        if leg_dir.is_dir():
            try:
                write_json_atomic(leg_dir / "metadata.json", record.to_dict())
            except (OSError, ValueError, TypeError):
                pass
    if wave_dir.is_dir():
        try:
            write_json_atomic(wave_dir / "wave.json", doc)
        except (OSError, ValueError, TypeError):
            pass
