"""The runs page's list, kept cheap as runs grow: one summary per run (id, kind, status, legs,
cost, start, tag), read from the run's own record (``wave.json``, ``run.json``) and kept, in
memory and in ``ORCH_HOME/cache/ui-runs-<hash>.json``, under that file's mtime and size.

Each request lists the runs folder (names only) and stats each run's record; only a record
that is new or changed is read again, and a run still going is read each time (its legs'
files change, not its record). Reading 10,000 ``wave.json`` takes most of a second; listing
and stat'ing them a few tens of milliseconds, and a new process finds the summaries on disk.
The summaries are a cache of the records, never a second source: a stale one is one whose
record changed, and then it is read again. Benches come from :func:`orchestrator.operations.runs.entries`'s
own bench code, kept while the bench files and the runs' bench folders are unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

VERSION = 1
RUNNING = ("running", "pending")


@dataclass
class Row:
    """One run as the runs page shows it."""

    id: str
    kind: str  # wave | deliberation | council | bench | another run.json kind
    status: str
    legs: int
    cost_usd: float | None
    created_at: str  # ISO, UTC
    tag: str | None

    @property
    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at)


def _when(stamp: Any, fallback: Path) -> str:
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


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class RunIndex:
    """Every run under ``runs_dir`` (and the benches of ``bench_dir``) as :class:`Row`,
    newest first; thread-safe (the server answers requests in threads)."""

    def __init__(self, runs_dir: Path, bench_dir: Path | None, cache_dir: Path | None) -> None:
        self.runs_dir, self.bench_dir = runs_dir, bench_dir
        key = hashlib.sha256(str(runs_dir.resolve()).encode()).hexdigest()[:16]
        self.cache_file = cache_dir / f"ui-runs-{key}.json" if cache_dir else None
        self._known: dict[str, tuple[list[int], dict[str, Any]]] | None = None
        self._benches: tuple[Any, list[Row]] | None = None
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._writer: threading.Thread | None = None
        self._made = self._written = 0
        self._out: tuple[tuple, list[Row]] | None = None  # the last list, and what made it  # snapshots taken, and the newest one written
        self.read = 0  # records read (not found in the cache) since start: for tests, bench

    # -- the persisted summaries ------------------------------------------------------------
    def _load(self) -> dict[str, tuple[list[int], dict[str, Any]]]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION \
                or data.get("runs_dir") != str(self.runs_dir.resolve()):
            return {}
        rows = data.get("rows")
        return {k: (v[0], v[1]) for k, v in rows.items()} if isinstance(rows, dict) else {}

    def _save(self) -> None:
        """Write the summaries in a thread: a page never waits on the cache's write (one
        writer at a time; the newest snapshot wins)."""
        if self.cache_file is None or self._known is None:
            return
        self._made += 1
        self._writer = threading.Thread(target=self._write, args=(self._made,
                                                                  dict(self._known)),
                                        daemon=True, name="orch-ui-index")
        self._writer.start()

    def flush(self) -> None:
        """Wait for the last write of the summaries (tests, the benchmark)."""
        if self._writer is not None:
            self._writer.join()

    def _write(self, n: int, known: dict[str, tuple[list[int], dict[str, Any]]]) -> None:
        from orchestrator.store import write_json_atomic

        with self._writing:
            if n <= self._written:  # a newer snapshot is already on disk
                return
            self._written = n
            try:
                self.cache_file.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(self.cache_file, {
                    "version": VERSION, "runs_dir": str(self.runs_dir.resolve()),
                    "rows": {k: [list(s), r] for k, (s, r) in known.items()}})
            except OSError:
                pass  # a read-only home: the summaries stay in memory only

    # -- reading one record -----------------------------------------------------------------
    def _wave(self, name: str, path: Path) -> dict[str, Any]:
        from orchestrator.engine.rebuild import load_wave
        from orchestrator.store import read_json

        try:
            doc = read_json(path)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            if doc.get("status") in RUNNING:  # rebuilt from its legs, as orch status does
                doc = load_wave(self.runs_dir, name)
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            return self._unreadable(name, "wave", path)
        legs = doc.get("legs") or []
        starts = sorted(s for s in (leg.get("started_at") for leg in legs
                                    if isinstance(leg, dict)) if isinstance(s, str) and s)
        return {"id": name, "kind": "deliberation" if doc.get("kind") == "deliberation"
                else "wave", "status": str(doc.get("status", "?")), "legs": len(legs),
                "cost_usd": doc.get("cost_usd"),
                "created_at": _when(doc.get("created_at") or (starts[0] if starts else None),
                                    path.parent),
                "tag": doc.get("tag")}

    def _run(self, name: str, path: Path) -> dict[str, Any]:
        from orchestrator.operations.runs import settled
        from orchestrator.store import read_json

        kind, run_id = name.split("-", 1)
        try:
            doc = read_json(path)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            return self._unreadable(run_id, kind, path)
        doc = settled(doc)
        return {"id": str(doc.get("run_id", run_id)), "kind": str(doc.get("kind", kind)),
                "status": str(doc.get("status", "?")),
                "legs": len(doc.get("seats") or doc.get("legs") or []),
                "cost_usd": doc.get("cost_usd"),
                "created_at": _when(doc.get("created_at"), path.parent), "tag": doc.get("tag")}

    @staticmethod
    def _unreadable(run_id: str, kind: str, path: Path) -> dict[str, Any]:
        return {"id": run_id, "kind": kind, "status": "unreadable", "legs": 0,
                "cost_usd": None, "created_at": _when(None, path.parent), "tag": None}

    # -- the listing ------------------------------------------------------------------------
    def rows(self) -> list[Row]:
        """Every run, newest first."""
        from orchestrator.operations.runs import BENCH_OF, LEG_DIR

        with self._lock:
            if self._known is None:
                self._known = self._load()
            base = os.fspath(self.runs_dir)
            try:
                names = [e.name for e in os.scandir(base)
                         if not e.name.startswith(".") and e.is_dir()]
            except OSError:
                names = []
            present = set(names)
            found: dict[str, tuple[list[int], dict[str, Any]]] = {}
            benches: list[str] = []
            orphans: set[str] = set()  # waves known only from their legs' folders
            changed = live = False
            known = self._known
            for name in names:  # strings, not Paths: this loop runs once per run per page
                if name.startswith(("bench-", "council-bench-")) and BENCH_OF.match(name):
                    benches.append(name)
                    continue
                m = LEG_DIR.match(name)
                if m and m["wave"] in present:
                    continue  # a leg's folder: its wave is listed
                record = f"{base}/{name}/" + ("run.json" if name.startswith("council-")
                                              else "wave.json")
                stamp = _stamp(record)
                if stamp is None and not name.startswith("council-") and "-" in name:
                    record = f"{base}/{name}/run.json"
                    stamp = _stamp(record)
                if stamp is None:
                    if m and os.path.exists(f"{base}/{name}/metadata.json"):
                        orphans.add(m["wave"])
                    continue
                held = known.get(name)
                if held is not None and held[0][0] == stamp[0] and held[0][1] == stamp[1] \
                        and held[1]["status"] not in RUNNING:
                    found[name] = held
                    continue
                self.read += 1
                row = self._wave(name, Path(record)) if record.endswith("/wave.json") \
                    else self._run(name, Path(record))
                found[name] = (list(stamp), row)
                live = live or row["status"] in RUNNING
                changed = changed or row["status"] not in RUNNING
            for wave_id in orphans:  # no wave.json yet: rebuilt from the legs each time
                self.read += 1
                found[wave_id] = ([0, 0], self._orphan(wave_id))
            if changed or len(found) - len(orphans) != len(known):
                self._known = {k: v for k, v in found.items() if k not in orphans}
                self._save()
            bench_rows = self._bench_rows(benches)
            key = (tuple(found), id(bench_rows))
            same = not changed and not live and not orphans and self._out is not None \
                and self._out[0] == key
            if same:  # nothing read, nothing came or went: the list made last time
                return self._out[1]
            out = [Row(**r) for _, r in found.values()] + bench_rows
            out.sort(key=lambda r: r.created_at, reverse=True)
            self._out = key, out
        return out

    def _orphan(self, wave_id: str) -> dict[str, Any]:
        from orchestrator.engine.rebuild import load_wave

        legs_dir = next(self.runs_dir.glob(f"{wave_id}-*"), self.runs_dir)
        try:
            doc = load_wave(self.runs_dir, wave_id)
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            return self._unreadable(wave_id, "wave", legs_dir / "x")
        legs = doc.get("legs") or []
        starts = sorted(s for s in (leg.get("started_at") for leg in legs) if s)
        return {"id": wave_id, "kind": "wave", "status": str(doc.get("status", "?")),
                "legs": len(legs), "cost_usd": doc.get("cost_usd"),
                "created_at": _when(doc.get("created_at") or (starts[0] if starts else None),
                                    legs_dir),
                "tag": doc.get("tag")}

    def _bench_rows(self, folders: list[str]) -> list[Row]:
        """The benches, as ``orch runs`` lists them; read again when a bench file or a bench
        folder came or went, or while one runs."""
        from orchestrator.operations.runs import benches

        files: list[tuple[str, int, int]] = []
        if self.bench_dir is not None:
            try:
                files = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size)
                               for e in os.scandir(self.bench_dir) if e.is_file())
            except OSError:
                files = []
        key = (tuple(files), tuple(sorted(folders)))
        if self._benches is not None and self._benches[0] == key \
                and not any(r.status in RUNNING for r in self._benches[1]):
            return self._benches[1]
        rows = []
        for e in benches(self.bench_dir, self.runs_dir):
            rows.append(Row(e.id, e.kind, e.status, e.legs, e.cost_usd,
                            e.created.astimezone(UTC).isoformat(), e.tag))
        self._benches = (key, rows)
        return rows
