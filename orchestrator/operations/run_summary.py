"""One run as every listing shows it (``orch runs``, ``orch status``, ``orch ui``, the MCP
runs tool): a :class:`RunEntry` read from the run's own record — ``wave.json`` (a wave, a
deliberation), ``run.json`` (a council) — and, for a run still going, from what its stage
or round waves and the ledger hold now (:func:`current`, engine/rebuild.py's ``load_wave``).

A run's status is one word of :data:`STATUSES`, the words orch writes; one it does not
know (a hand-edited file, a newer orch) lists as ``unreadable``, so every status the listing
prints is one it can be filtered on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

# what a run (wave, deliberation, council, bench) may say it is; tests/test_run_listing.py
# holds that every status orch writes is one of these
STATUSES = ("running", "complete", "partial", "degraded", "error", "aborted", "quorum",
            "interrupted", "unreadable")
RUNNING = ("running", "pending")


class Folders(Sequence[Path]):
    """A run's folders (its own, then its legs' in order), made into paths only when asked:
    a listing of 10,000 runs for a page needs none of them."""

    __slots__ = ("_base", "_names", "_paths")

    def __init__(self, base: Path, own: str | None, legs: list[str]) -> None:
        self._base, self._names, self._paths = base, (own, legs), None

    def _made(self) -> list[Path]:
        if self._paths is None:
            own, legs = self._names
            self._paths = [self._base / n for n in ([own] if own else [])
                           + sorted(legs, key=_leg_order)]
        return self._paths

    def __getitem__(self, index):
        return self._made()[index]

    def __len__(self) -> int:
        return len(self._made())


def _leg_order(name: str) -> tuple[str, int]:
    wave, _, n = name.rpartition("-")
    return wave, int(n) if n.isdigit() else 0


@dataclass
class RunEntry:
    """One run as the listings show it."""

    id: str
    kind: str  # wave | deliberation | council | bench | another run.json kind
    status: str
    legs: int
    cost_usd: float | None
    created_at: str  # ISO, UTC
    tag: str | None
    exit_code: int | None
    dirs: Sequence[Path]
    waves: list[dict[str, Any]] | None = None  # a bench's trial waves, folded under it
    question: str = ""  # the prompt's first line (its briefing.md's), for the listing
    models: list[str] = field(default_factory=list)  # the legs' or seats' models, once each
    parent: str | None = None  # a follow-up's: the wave it continues (--continue)

    @property
    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "legs": self.legs,
                "cost_usd": self.cost_usd, "created_at": self.created.isoformat(),
                "tag": self.tag, "exit_code": self.exit_code,
                "dirs": [str(d) for d in self.dirs],
                **({"waves": self.waves} if self.waves is not None else {}),
                **({"parent_wave_id": self.parent} if self.parent else {})}


def status_of(value: Any) -> str:
    """A record's status as the listing says it: a word of :data:`STATUSES`."""
    return value if isinstance(value, str) and value in STATUSES else "unreadable"


def when(stamp: Any, fallback: Path) -> str:
    """An ISO start time (UTC); a record without one is as old as its folder."""
    moment = None
    if isinstance(stamp, str) and stamp:
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            moment = None
    if moment is None:
        try:
            moment = datetime.fromtimestamp(fallback.stat().st_mtime, UTC)
        except OSError:
            moment = datetime.fromtimestamp(0, UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _first_start(legs: list[Any]) -> str | None:
    starts = sorted(s for s in (leg.get("started_at") for leg in legs if isinstance(leg, dict))
                    if isinstance(s, str) and s)
    return starts[0] if starts else None


def unreadable(run_id: str, kind: str, folder: Path) -> dict[str, Any]:
    return {"id": run_id, "kind": kind, "status": "unreadable", "legs": 0, "cost_usd": None,
            "created_at": when(None, folder), "tag": None, "exit_code": None}


QUESTION_BYTES = 4096  # of a briefing.md, read for its first line


def question(folder: Path) -> str:
    """The first non-empty line of the run's ``briefing.md`` (its question; a deliberation's
    is its first round's), or ""."""
    try:
        found = folder / "briefing.md"
        if not found.exists():
            found = next(iter(sorted(folder.glob("rounds/*-round-1/briefing.md"))), found)
        with found.open("rb") as f:
            text = f.read(QUESTION_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def models_of(entries: list[Any]) -> list[str]:
    return list(dict.fromkeys(str(e["model"]) for e in entries
                              if isinstance(e, dict) and e.get("model")))


def _wave_summary(wave_id: str, doc: dict[str, Any], folder: Path) -> dict[str, Any]:
    legs = doc.get("legs") or []
    return {"question": question(folder), "models": models_of(legs), "id": wave_id, "kind": "deliberation" if doc.get("kind") == "deliberation"
            else "wave", "status": status_of(doc.get("status")), "legs": len(legs),
            "cost_usd": doc.get("cost_usd"),
            "created_at": when(doc.get("created_at") or _first_start(legs), folder),
            "tag": doc.get("tag"), "exit_code": doc.get("exit_code"),
            "parent": doc["parent_wave_id"] if isinstance(doc.get("parent_wave_id"), str)
            else None}


def wave(runs_dir: Path, wave_id: str, record: Path) -> dict[str, Any]:
    """A wave or a deliberation from its ``wave.json``; one not yet ended is read as
    ``orch status`` reads it (live, or repaired when its process is gone)."""
    from orchestrator.engine.rebuild import load_wave
    from orchestrator.store import read_json

    try:
        doc = read_json(record)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        if doc.get("status") in RUNNING:
            doc = load_wave(runs_dir, wave_id)
    except (OrchError, OSError, ValueError, KeyError, TypeError):
        return unreadable(wave_id, "wave", record.parent)
    return _wave_summary(wave_id, doc, record.parent)


def orphan(runs_dir: Path, wave_id: str, folder: Path) -> dict[str, Any]:
    """A wave known only from its legs' folders (its ``wave.json`` never written)."""
    from orchestrator.engine.rebuild import load_wave

    try:
        doc = load_wave(runs_dir, wave_id)
    except (OrchError, OSError, ValueError, KeyError, TypeError):
        return unreadable(wave_id, "wave", folder)
    return _wave_summary(wave_id, doc, folder)


def run(name: str, record: Path) -> dict[str, Any]:
    """A council (or another ``<kind>-<id>/run.json``) from its record, as it is now."""
    from orchestrator.store import read_json

    kind, run_id = name.split("-", 1)
    try:
        doc = read_json(record)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    except (OSError, ValueError):
        return unreadable(run_id, kind, record.parent)
    doc = current(doc, record.parent)
    return {"question": question(record.parent),
            "models": models_of(doc.get("seats") or doc.get("legs") or []),
            "id": str(doc.get("run_id", run_id)), "kind": str(doc.get("kind", kind)),
            "status": status_of(doc.get("status")),
            "legs": len(doc.get("seats") or doc.get("legs") or []),
            "cost_usd": doc.get("cost_usd"), "created_at": when(doc.get("created_at"),
                                                                 record.parent),
            "tag": doc.get("tag"), "exit_code": doc.get("exit_code")}


def current(doc: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """A ``run.json`` as it is now. One that says ``running`` although the process that wrote
    it is gone (killed with -9, the machine rebooted) is ``interrupted``: listing, ``tail``
    and ``gc`` never wait on a run that cannot finish (liveness is the pid with its start
    time, as for waves), and a dead council in ``folder`` is repaired from its stages'
    record (council/repair.py). A council still running is read from its stage waves and
    the ledger: the stages so far, the one at work included, and what they were billed."""
    from orchestrator.pids import same_process

    if doc.get("status") != "running":
        return doc
    council = folder is not None and doc.get("kind") == "council"
    if same_process(doc.get("pid"), doc.get("pid_started")):
        if not council:
            return doc
        from orchestrator.council.repair import live

        return live(folder, doc)
    doc = {**doc, "status": "interrupted", "exit_code": 1,
           "error": doc.get("error") or "the process that ran it is gone (killed?)"}
    if council:
        from orchestrator.council.repair import repaired

        doc = repaired(folder, doc)
    return doc
