"""``orch bench`` runs as the listings show them: one results file each (in the bench folder,
or where ``--out`` put it, with a link left in the bench folder), the report folder beside
it and the trial waves in the runs folder, all one run. A bench whose results were never
written (it is running, or it was killed) is listed from its waves."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.operations.run_summary import RunEntry, current, when
from orchestrator.store import read_json

# a bench's waves, legs and councils (council-<bench id>-t0001)
BENCH_OF = re.compile(r"^(?:council-)?(?P<bench>bench-\d{8}-\d{6}-[0-9a-f]+)-")
REPORT_FILES = {"report.md", "report.html"}  # all a bench writes in its report folder
LINK = ".where"  # ORCH_HOME/bench/<id>.where: the results path of a bench run with --out


def bench_folders(runs_dir: Path) -> dict[str, list[Path]]:
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
    wave not yet ended is read as `orch status` reads it: live from its legs and the ledger,
    or repaired from the record when its process is gone (a killed bench's waves are never
    shown ``running``, nor its paid trials $0)."""
    from orchestrator.engine.rebuild import load_wave

    waves = []
    for folder in folders:
        name = "wave.json" if (folder / "wave.json").is_file() else "run.json"
        if not (folder / name).is_file():
            continue
        try:
            doc = load_wave(folder.parent, folder.name) if name == "wave.json" else \
                current(read_json(folder / name), folder)
            waves.append({"id": folder.name, "status": doc.get("status", "?"),
                          "legs": len(doc.get("legs") or doc.get("seats") or []),
                          "cost_usd": doc.get("cost_usd")})
        except (OrchError, OSError, ValueError, KeyError, TypeError, AttributeError):
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


def _unreadable(bench_id: str, dirs: list[Path], waves: list[dict[str, Any]] | None = None
                ) -> RunEntry:
    return RunEntry(bench_id, "bench", "unreadable", 0, None, when(None, dirs[0]), None, None,
                    dirs, waves)


def benches(bench_dir: Path | None, runs_dir: Path) -> list[RunEntry]:
    """Every bench: its results file read (a partial one while it runs or after a kill),
    and its trial waves folded under it."""
    out: list[RunEntry] = []
    folders = bench_folders(runs_dir)
    for path, link in _bench_results(bench_dir):
        extra = [link] if link is not None else []
        try:
            doc = read_json(path)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            trials = list(doc.get("trials") or [])
        except (OSError, ValueError, TypeError, AttributeError):
            doc = None
        if link is not None and (doc is None or doc.get("bench_id") != link.name.removesuffix(
                LINK)):
            # a --out file gone, or no longer this bench's: only orch's own files are its
            bench_id = link.name.removesuffix(LINK)
            mine = folders.pop(bench_id, [])
            out.append(_unreadable(bench_id, [link, *mine], _bench_waves(mine)))
            continue
        if doc is None:
            out.append(_unreadable(path.stem, [path, *extra]))
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
            cost = _paid(trials, waves, cost)  # what its waves were billed, so far or all
        out.append(RunEntry(bench_id, "bench", status, len(trials), cost,
                            when(doc.get("started"), path), None, code,
                            [path, *([report] if ours else []), *extra, *mine], waves))
    for bench_id, mine in folders.items():  # waves without results: running, or killed
        waves = _bench_waves(mine)
        running = any(w["status"] == "running" for w in waves)
        made = datetime.fromtimestamp(min(p.stat().st_mtime for p in mine), UTC)
        costs = [w["cost_usd"] for w in waves]  # what the trials were billed (repaired)
        known = [c for c in costs if isinstance(c, int | float)]
        out.append(RunEntry(bench_id, "bench", "running" if running else "interrupted",
                            sum(w["legs"] for w in waves),
                            round(sum(known), 8) if known and len(known) == len(costs)
                            else None, made.isoformat(), None, None if running else 1, mine,
                            waves))
    return out


def _paid(trials: list[Any], waves: list[dict[str, Any]], graded: float | None
          ) -> float | None:
    """What a bench not ended paid: its trial waves' billed cost (live, or repaired from the
    ledger; a trial billed before it was graded paid too) and its graded command trials' own
    costs. ``graded`` (the graded trials' sum) when a wave's cost is unknown."""
    billed = [w["cost_usd"] for w in waves]
    if any(not isinstance(c, int | float) for c in billed):
        return graded
    commands = [t.get("cost_usd") for t in trials
                if isinstance(t, dict) and t.get("kind") == "command"]
    return round(sum(billed) + sum(c for c in commands if isinstance(c, int | float)), 8)


def results(bench_dir: Path | None, bench_id: str) -> dict[str, Any] | None:
    """A bench's results document by its id (``bench-…`` or without the prefix): the file in
    the bench folder named so, else the one (there, or where ``--out`` put it) whose
    ``bench_id`` it is; None when there is none."""
    def read(path: Path) -> dict[str, Any] | None:
        try:
            doc = read_json(path)
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    if bench_dir is None:
        return None
    for name in (f"{bench_id}.json", f"bench-{bench_id}.json"):
        if (bench_dir / name).is_file():
            return read(bench_dir / name)
    for path, _ in _bench_results(bench_dir):  # the id inside the file
        doc = read(path)
        if doc is not None and doc.get("bench_id") in (bench_id, f"bench-{bench_id}"):
            return doc
    return None
