"""Past runs, read from their folders: waves (``<id>/wave.json`` and ``<id>-N/`` legs) and
councils (``council-<id>/run.json``). Listing, one run's document, following a live one,
and removing old folders (the ledger keeps its rows: spend history outlives the files)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.store import read_json

LEG_DIR = re.compile(r"^(?P<wave>.+)-(?P<n>\d+)$")
# a bench's waves, legs and councils (council-<bench id>-t0001)
BENCH_OF = re.compile(r"^(?:council-)?(?P<bench>bench-\d{8}-\d{6}-[0-9a-f]+)-")
REPORT_FILES = {"report.md", "report.html"}  # all a bench writes in its report folder
LINK = ".where"  # ORCH_HOME/bench/<id>.where: the results path of a bench run with --out
FINAL = ("complete", "partial", "error", "aborted", "interrupted")


@dataclass
class RunEntry:
    """One run as ``orch runs`` lists it."""

    id: str
    kind: str  # wave | council | bench
    status: str
    legs: int
    cost_usd: float | None
    created_at: str | None
    tag: str | None
    exit_code: int | None
    dirs: list[Path]
    waves: list[dict[str, Any]] | None = None  # a bench's trial waves, folded under it

    @property
    def created(self) -> datetime | None:
        try:
            moment = datetime.fromisoformat(self.created_at) if self.created_at else None
        except ValueError:
            moment = None
        if moment is None:  # no stamp: the folder's age
            moment = datetime.fromtimestamp(self.dirs[0].stat().st_mtime, UTC)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "legs": self.legs,
                "cost_usd": self.cost_usd, "created_at": self.created.isoformat(),
                "tag": self.tag, "exit_code": self.exit_code,
                "dirs": [str(d) for d in self.dirs],
                **({"waves": self.waves} if self.waves is not None else {})}


def _wave_ids(runs_dir: Path) -> dict[str, list[Path]]:
    """wave id -> its folders (the wave's own and each leg's)."""
    waves: dict[str, list[Path]] = {}
    for entry in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        if not entry.is_dir() or entry.name.startswith(("council-", "bench-", ".")):
            continue
        if (entry / "wave.json").exists():
            waves.setdefault(entry.name, []).insert(0, entry)
        elif (entry / "metadata.json").exists() and (m := LEG_DIR.match(entry.name)):
            waves.setdefault(m["wave"], []).append(entry)
    return waves


def entries(runs_dir: Path, bench_dir: Path | None = None) -> Iterator[RunEntry]:
    """Every run under ``runs_dir`` (and each bench result file in ``bench_dir``); an
    unreadable one is listed ``unreadable``."""
    from orchestrator.engine.rebuild import load_wave

    for wave_id, dirs in _wave_ids(runs_dir).items():
        try:
            doc = load_wave(runs_dir, wave_id)
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            yield RunEntry(wave_id, "wave", "unreadable", 0, None, None, None, None, dirs)
            continue
        legs = doc.get("legs") or []
        yield RunEntry(wave_id, "wave", doc.get("status", "?"), len(legs), doc.get("cost_usd"),
                       doc.get("created_at") or _leg_start(legs), doc.get("tag"),
                       doc.get("exit_code"), dirs)
    for path in sorted(runs_dir.glob("*-*/run.json")) if runs_dir.is_dir() else []:
        if BENCH_OF.match(path.parent.name):  # a bench's council trial: folded under it
            continue
        kind = path.parent.name.split("-", 1)[0]
        run_id = path.parent.name.split("-", 1)[1]
        try:
            doc = _object(read_json(path))
        except (OSError, ValueError):
            yield RunEntry(run_id, kind, "unreadable", 0, None, None, None, None, [path.parent])
            continue
        doc = settled(doc, path.parent)
        yield RunEntry(doc.get("run_id", run_id), doc.get("kind", kind), doc.get("status", "?"),
                       len(doc.get("seats") or doc.get("legs") or []), doc.get("cost_usd"),
                       doc.get("created_at"), doc.get("tag"), doc.get("exit_code"),
                       [path.parent])
    yield from benches(bench_dir, runs_dir)


def _bench_folders(runs_dir: Path) -> dict[str, list[Path]]:
    """bench id -> its trial waves' folders (each wave's own and its legs') in the runs
    folder."""
    out: dict[str, list[Path]] = {}
    found = [*runs_dir.glob("bench-*"), *runs_dir.glob("council-bench-*")] \
        if runs_dir.is_dir() else []
    for entry in sorted(found):
        if entry.is_dir() and (m := BENCH_OF.match(entry.name)):
            out.setdefault(m["bench"], []).append(entry)
    return out


def _bench_waves(folders: list[Path]) -> list[dict[str, Any]]:
    """A bench's trial waves as `orch runs` folds them under it: id, status, legs, cost. A
    wave whose process is gone is read as `orch status` reads it: repaired from the record
    (a killed bench's waves are never shown ``running``, nor its paid trials $0)."""
    from orchestrator.engine.rebuild import load_wave

    waves = []
    for folder in folders:
        name = "wave.json" if (folder / "wave.json").is_file() else "run.json"
        if not (folder / name).is_file():
            continue
        try:
            doc = load_wave(folder.parent, folder.name) if name == "wave.json" else \
                settled(read_json(folder / name), folder)
            waves.append({"id": folder.name, "status": doc.get("status", "?"),
                          "legs": len(doc.get("legs") or doc.get("seats") or []),
                          "cost_usd": doc.get("cost_usd")})
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            waves.append({"id": folder.name, "status": "unreadable", "legs": 0,
                          "cost_usd": None})
    return waves


def _bench_results(bench_dir: Path | None) -> list[tuple[Path, Path | None]]:
    """(results file, its link in ``bench_dir`` or None): the files saved there, and those
    a ``--out`` bench left a link to."""
    if not bench_dir or not bench_dir.is_dir():
        return []
    found: list[tuple[Path, Path | None]] = [
        (path, None) for path in sorted(bench_dir.glob("bench-*.json"))]
    seen = {path.resolve() for path, _ in found}
    for link in sorted(bench_dir.glob(f"bench-*{LINK}")):
        try:
            target = Path(link.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            continue
        if target.resolve() in seen:  # --out into the bench folder itself: listed once
            found = [(p, link if p.resolve() == target.resolve() else k) for p, k in found]
            continue
        found.append((target, link))
    return found


def benches(bench_dir: Path | None, runs_dir: Path) -> Iterator[RunEntry]:
    """``orch bench`` results: one JSON file each (in ``bench_dir``, or where ``--out``
    put it), with the report folder beside it and the trial waves in the runs folder, all
    one run. A bench whose results were never written (it is running, or it was killed)
    is listed from its waves."""
    folders = _bench_folders(runs_dir)
    for path, link in _bench_results(bench_dir):
        extra = [link] if link is not None else []
        try:
            doc = _object(read_json(path))
            trials = list(doc.get("trials") or [])
        except (OSError, ValueError, TypeError, AttributeError):
            doc = None
        if link is not None and (not isinstance(doc, dict)
                                 or doc.get("bench_id") != link.name.removesuffix(LINK)):
            # a --out file gone, or no longer this bench's: only orch's own files are its
            bench_id = link.name.removesuffix(LINK)
            mine = folders.pop(bench_id, [])
            yield RunEntry(bench_id, "bench", "unreadable", 0, None, None, None, None,
                           [link, *mine], _bench_waves(mine))
            continue
        if doc is None:
            yield RunEntry(path.stem, "bench", "unreadable", 0, None, None, None, None,
                           [path, *extra])
            continue
        bench_id = doc.get("bench_id", path.stem)
        mine = folders.pop(bench_id, [])
        report = path.with_suffix("")  # the report folder, when it holds only the report
        ours = report.is_dir() and {p.name for p in report.iterdir()} <= REPORT_FILES
        costs = [t.get("cost_usd") for t in trials if isinstance(t, dict)]
        known = [c for c in costs if isinstance(c, int | float)]
        stopped = doc.get("interrupted")
        excluded = bool(doc.get("exclusions"))  # as `orch bench` exits: 2 with exclusions
        status = "interrupted" if stopped else "partial" if excluded else "complete"
        code = (1 if not stopped["signal"] else 128 + stopped["signal"]) if stopped \
            else 2 if excluded else 0
        cost = round(sum(known), 8) if known or not costs else None
        waves = _bench_waves(mine)
        marker = doc.get("running")  # a partial file, written as each trial is graded
        if isinstance(marker, dict):
            from orchestrator.pids import same_process

            status, code = ("running", None) if same_process(
                marker.get("pid"), marker.get("pid_started")) else ("interrupted", 1)
            if status == "interrupted":
                cost = _paid(trials, waves, cost)
        yield RunEntry(bench_id, "bench", status, len(trials), cost,
                       doc.get("started"), None, code,
                       [path, *([report] if ours else []), *extra, *mine], waves)
    for bench_id, mine in folders.items():  # waves without results: running, or killed
        waves = _bench_waves(mine)
        running = any(w["status"] == "running" for w in waves)
        made = datetime.fromtimestamp(min(p.stat().st_mtime for p in mine), UTC)
        costs = [w["cost_usd"] for w in waves]  # what the trials were billed (repaired)
        known = [c for c in costs if isinstance(c, int | float)]
        yield RunEntry(bench_id, "bench", "running" if running else "interrupted",
                       sum(w["legs"] for w in waves),
                       round(sum(known), 8) if known and len(known) == len(costs) else None,
                       made.isoformat(), None, None if running else 1, mine, waves)


def _paid(trials: list[Any], waves: list[dict[str, Any]], graded: float | None
          ) -> float | None:
    """What a killed bench paid: its trial waves' billed cost (repaired from the ledger; a
    trial killed before it was graded paid too) and its graded command trials' own costs.
    ``graded`` (the graded trials' sum) when a wave's cost is unknown."""
    billed = [w["cost_usd"] for w in waves]
    if any(not isinstance(c, int | float) for c in billed):
        return graded
    commands = [t.get("cost_usd") for t in trials
                if isinstance(t, dict) and t.get("kind") == "command"]
    return round(sum(billed) + sum(c for c in commands if isinstance(c, int | float)), 8)


def _object(doc: Any) -> dict[str, Any]:
    """A run's JSON file must hold an object: anything else reads as unreadable."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


def _leg_start(legs: list[dict]) -> str | None:
    starts = sorted(s for s in (leg.get("started_at") for leg in legs) if s)
    return starts[0] if starts else None


SHOWN_MATCHES = 5


def find(runs_dir: Path, run_id: str, bench_dir: Path | None = None) -> RunEntry:
    """The run named by ``run_id``: its exact id (``ID`` or ``KIND-ID``), else the one run
    whose id starts with it — the rule every command that takes a run id follows."""
    run_id = run_id.strip()
    every = list(entries(runs_dir, bench_dir))
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


def latest(runs_dir: Path, bench_dir: Path | None = None) -> RunEntry:
    """The run started last (``orch status`` with no id)."""
    every = list(entries(runs_dir, bench_dir))
    if not every:
        raise OrchError(f"no runs under {runs_dir} yet; `orch fanout` starts one (or pass "
                        "--runs-dir)")
    return max(every, key=lambda e: e.created)


def settled(doc: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """A ``run.json`` that says ``running`` although the process that wrote it is gone (killed
    with -9, the machine rebooted) is ``interrupted``: listing, ``tail`` and ``gc`` never wait
    on a run that cannot finish. Liveness is the pid with its start time, as for waves. A
    dead council in ``folder`` is repaired from its stages' record (council/repair.py): its
    run.json then shows what each stage was billed, not the $0 of its start."""
    from orchestrator.pids import same_process

    if doc.get("status") != "running" or same_process(doc.get("pid"), doc.get("pid_started")):
        return doc
    doc = {**doc, "status": "interrupted", "exit_code": 1,
           "error": doc.get("error") or "the process that ran it is gone (killed?)"}
    if folder is not None and doc.get("kind") == "council":
        from orchestrator.council.repair import repaired

        doc = repaired(folder, doc)
    return doc


def document(runs_dir: Path, entry: RunEntry) -> dict[str, Any]:
    """What ``orch status`` shows for a wave; ``run.json`` for a council or bench."""
    if entry.kind == "wave":
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
        doc = settled(read_json(path), path.parent)
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


def live_legs(runs_dir: Path, wave_id: str) -> list[dict[str, Any]]:
    """Each leg's metadata.json as it is now (progress is written while a leg runs)."""
    legs = []
    for path in sorted(runs_dir.glob(f"{wave_id}-*/metadata.json")):
        if LEG_DIR.match(path.parent.name)["wave"] != wave_id:
            continue
        try:
            legs.append(read_json(path))
        except (OSError, ValueError):
            continue  # caught mid-rename: the next poll reads it
    return legs


def age(moment: datetime, now: datetime | None = None) -> str:
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def collect(runs_dir: Path, older_than: datetime,
            bench_dir: Path | None = None) -> list[RunEntry]:
    """Finished runs created before ``older_than``: what ``runs gc`` removes."""
    return [e for e in entries(runs_dir, bench_dir)
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
