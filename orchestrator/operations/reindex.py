"""Runs recorded before the search index existed (or whose docs were lost), indexed from their
folders: ``orch runs search --reindex`` and ``orch ledger upgrade``.

Every leg folder under the runs directory (a fanout's, a council's stages under
``council-<id>/waves/``, a deliberation's rounds under ``<id>/rounds/``, a bench's trials) is
read: its ``metadata.json`` gives the answer, its wave's ``briefing.md`` the prompt and its
``wave.json`` the run. Each leg goes through the index's one door
(:func:`~orchestrator.ledger.search_table.admitted`) and replaces what the index held for it,
so running it again changes nothing. No file is written; the spend ledger is not touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.store import read_json

MAX_DEPTH = 4  # runs/council-<id>/waves/<leg>, runs/<bench trial>/rounds/<leg>
BATCH = 200


@dataclass
class Reindexed:
    legs: int  # legs written (each replaces what the index held for it)
    waves: int
    added: int  # legs the index did not hold before
    index: str  # "fts5", "tsvector" or "scan"

    def to_dict(self) -> dict[str, Any]:
        return {"legs": self.legs, "waves": self.waves, "added": self.added,
                "index": self.index}


def reindex(ledger, runs_dir: Path) -> Reindexed:
    """Index every leg found under ``runs_dir``."""
    from orchestrator.ledger.search_table import TABLE, create_fts, put

    index = "tsvector"
    with ledger.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            index = "fts5" if create_fts(conn) else "scan"
        before = conn.execute(sa.select(sa.func.count()).select_from(TABLE)).scalar() or 0
    legs, waves = 0, set()
    batch = []
    for doc in docs(runs_dir):
        batch.append(doc)
        waves.add(doc.wave_id)
        if len(batch) >= BATCH:
            legs += _write(ledger, batch, put)
            batch = []
    legs += _write(ledger, batch, put)
    with ledger.engine.connect() as conn:
        after = conn.execute(sa.select(sa.func.count()).select_from(TABLE)).scalar() or 0
    return Reindexed(legs=legs, waves=len(waves), added=max(0, after - before), index=index)


def _write(ledger, batch: list, put) -> int:
    if not batch:
        return 0
    with ledger.engine.begin() as conn:
        ledger.bound(conn, None)
        return put(conn, batch)


def docs(runs_dir: Path) -> Iterator:
    """Each leg under ``runs_dir`` as an admitted doc."""
    from orchestrator.ledger.search_table import PROMPT_CHARS, admitted, indexable

    for folder in _folders(runs_dir):
        legs, waves = _listing(folder)
        prompts: dict[str, str] = {}
        for wave_id, records in legs.items():
            wave = waves.get(wave_id) or {}
            if wave_id not in prompts:
                prompts[wave_id] = indexable(_briefing(folder / wave_id), PROMPT_CHARS)
            for record in records:
                yield admitted(
                    wave_id=wave_id, leg_id=str(record.get("leg_id")),
                    kind=str(record.get("kind") or "leg"), model=str(record.get("model") or ""),
                    prompt=None, prompt_admitted=prompts[wave_id],
                    answer=record.get("answer") if isinstance(record.get("answer"), str)
                    else None,
                    run_id=wave.get("run_id") if isinstance(wave.get("run_id"), str) else None,
                    status=record.get("status") if isinstance(record.get("status"), str)
                    else None,
                    tag=wave.get("tag") if isinstance(wave.get("tag"), str) else None,
                    ts=record.get("ended_at") or record.get("started_at")
                    or wave.get("created_at"))


def _folders(root: Path, depth: int = 0) -> Iterator[Path]:
    """``root`` and every folder below it that may hold waves or legs (not a leg's own)."""
    yield root
    if depth >= MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        if os.path.exists(os.path.join(entry.path, "metadata.json")):
            continue  # a leg's folder: its files only
        yield from _folders(Path(entry.path), depth + 1)


def _listing(folder: Path) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The legs in ``folder`` by wave id (each leg's metadata.json; a leg its wave.json
    lists without a folder of its own from there), and the waves' documents."""
    legs: dict[str, list[dict]] = {}
    waves: dict[str, dict] = {}
    seen: set[str] = set()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return legs, waves
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
            continue
        wave = _read(Path(entry.path) / "wave.json")
        if wave.get("wave_id") == entry.name:
            waves[entry.name] = wave
        meta = _read(Path(entry.path) / "metadata.json")
        wave_id, leg_id = meta.get("wave_id"), meta.get("leg_id")
        if isinstance(wave_id, str) and leg_id == entry.name:
            legs.setdefault(wave_id, []).append(meta)
            seen.add(entry.name)
    for wave_id, wave in waves.items():
        listed = [*(wave.get("legs") or []), *([wave["chair"]] if wave.get("chair") else [])]
        for leg in listed:
            if isinstance(leg, dict) and leg.get("wave_id") == wave_id \
                    and isinstance(leg.get("leg_id"), str) and leg["leg_id"] not in seen:
                legs.setdefault(wave_id, []).append(leg)
                seen.add(leg["leg_id"])
    return legs, waves


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _briefing(wave_dir: Path) -> str:
    try:
        with open(wave_dir / "briefing.md", encoding="utf-8", errors="replace") as fh:
            return fh.read(4_000_000)
    except OSError:
        return ""
