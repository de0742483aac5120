"""Past and running runs, read from their folders: waves (``<id>/wave.json`` and ``<id>-N/``
legs), deliberations (``<id>/wave.json`` and ``<id>/rounds/``), councils
(``council-<id>/run.json``) and benches. Listing (:mod:`run_index`, the one listing every face
reads), one run's document, and removing old folders (the ledger keeps its rows: spend
history outlives the files)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.operations.benches import LINK
from orchestrator.operations.run_index import RunIndex
from orchestrator.operations.run_summary import STATUSES, RunEntry, current
from orchestrator.store import read_json

__all__ = ["LINK", "STATUSES", "RunEntry", "current", "entries", "find", "latest", "document",
           "age", "collect", "remove"]


def entries(runs_dir: Path, bench_dir: Path | None = None,
            cache_dir: Path | None = None) -> list[RunEntry]:
    """Every run under ``runs_dir`` (and each bench result file in ``bench_dir``), newest
    first; an unreadable one is listed ``unreadable``. ``cache_dir``: where the summaries
    are kept between commands (ORCH_HOME/cache)."""
    index = RunIndex(runs_dir, bench_dir, cache_dir)
    found = index.entries()
    index.flush()  # the summaries on disk before the command ends
    return found


SHOWN_MATCHES = 5


def find(runs_dir: Path, run_id: str, bench_dir: Path | None = None,
         cache_dir: Path | None = None) -> RunEntry:
    """The run named by ``run_id``: its exact id (``ID`` or ``KIND-ID``), else the one run
    whose id starts with it — the rule every command that takes a run id follows."""
    run_id = run_id.strip()
    every = entries(runs_dir, bench_dir, cache_dir)
    for entry in every:
        if run_id in (entry.id, f"{entry.kind}-{entry.id}"):
            return entry
    matches = [e for e in every if run_id and (e.id.startswith(run_id)
                                               or f"{e.kind}-{e.id}".startswith(run_id))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(f"{e.kind} {e.id}" for e in matches[:SHOWN_MATCHES])
        more = ", ..." if len(matches) > SHOWN_MATCHES else ""
        raise UsageProblem(f"ambiguous: {len(matches)} runs match {run_id!r} ({shown}{more}); "
                        "give more of the id")
    raise UsageProblem(f"no run {run_id!r} under {runs_dir}; `orch runs` lists them "
                    "(or pass --runs-dir)")


def latest(runs_dir: Path, bench_dir: Path | None = None,
           cache_dir: Path | None = None) -> RunEntry:
    """The run started last (``orch status`` with no id)."""
    every = entries(runs_dir, bench_dir, cache_dir)
    if not every:
        raise OrchError(f"no runs under {runs_dir} yet; `orch fanout` starts one (or pass "
                        "--runs-dir)")
    return max(every, key=lambda e: e.created)


def children(every: list[RunEntry], wave_id: str) -> list[str]:
    """The follow-ups of ``wave_id`` (``orch fanout --continue``), oldest first."""
    return [e.id for e in sorted(every, key=lambda e: e.created_at) if e.parent == wave_id]


def document(runs_dir: Path, entry: RunEntry) -> dict[str, Any]:
    """What ``orch status`` shows: a wave's or a deliberation's document (live from its legs,
    rounds and the ledger while it runs); ``run.json`` for a council (its stages so far
    while it runs) or a bench."""
    if entry.kind in ("wave", "deliberation"):
        from orchestrator.engine.rebuild import load_wave

        return load_wave(runs_dir, entry.id)
    if entry.kind == "bench" and not entry.dirs[0].is_file():  # its waves, no results
        return with_in_flight({
            "bench_id": entry.id, "status": entry.status, "exit_code": entry.exit_code,
            "waves": entry.waves or [], "trials": None, "cost_usd": entry.cost_usd,
            "error": "no results file: the bench is running, or was killed before it wrote "
                     "one"}, entry.id)
    path = entry.dirs[0] if entry.dirs[0].is_file() else entry.dirs[0] / "run.json"
    try:
        doc = current(read_json(path), path.parent)
        if entry.kind == "bench" and isinstance(doc, dict) and "running" in doc:
            doc = {**doc, "status": entry.status, "exit_code": entry.exit_code,  # partial
                   "cost_usd": entry.cost_usd, "waves": entry.waves or []}
        return with_in_flight(doc, entry.id)
    except (OSError, ValueError) as exc:
        raise OrchError(f"{path} cannot be read ({exc}); the run's other files are "
                        "beside it") from None


def with_in_flight(doc: Any, run_id: str) -> Any:
    """A run no process runs any more, with the requests its waves journaled that no row
    records: "in flight at the kill: may be billed, at most $X" (account/journal.py)."""
    if not isinstance(doc, dict) or doc.get("status") == "running":
        return doc
    from orchestrator.account.journal import at_kill

    flying = at_kill(prefix=f"{run_id}-")
    return {**doc, "in_flight_at_kill": flying} if flying["requests"] else doc


def age(moment: datetime, now: datetime | None = None) -> str:
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def collect(runs_dir: Path, older_than: datetime, bench_dir: Path | None = None,
            cache_dir: Path | None = None) -> list[RunEntry]:
    """Finished runs created before ``older_than``: what ``runs gc`` removes."""
    return [e for e in entries(runs_dir, bench_dir, cache_dir)
            if e.created < older_than and e.status not in ("running", "pending")]


def remove(entry: RunEntry) -> int:
    """Delete a run's folders; the bytes freed."""
    freed = 0
    for folder in entry.dirs:
        if not folder.exists():
            continue
        if folder.is_file():  # a bench's result file (or its link)
            freed += folder.stat().st_size
            folder.unlink()
            continue
        freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        shutil.rmtree(folder)
    return freed
