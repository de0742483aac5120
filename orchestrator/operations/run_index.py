"""The one run listing, kept cheap as runs grow: every run's summary (:mod:`run_summary`)
kept, in memory and in ``ORCH_HOME/cache/runs-<hash>.json``, under its record's mtime and
size. ``orch runs``, ``orch status`` and ``orch ui`` all read runs through it.

Each listing lists the runs folder (names only) and stats each run's record; only a record
that is new or changed is read again, and a run still going is read each time (its stage,
round and leg files and its ledger rows change, not its record). The summaries are a cache
of the records, never a second source: a stale one is one whose record changed, and then it
is read again. The file is also stale when the code that makes the summaries changed: its
version is a digest of that code's source, so no one has to remember to bump it. Benches
come from :func:`orchestrator.operations.benches.benches`, kept in memory while the bench
files and the runs' bench folders are unchanged and none is running."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

from orchestrator.operations import run_summary
from orchestrator.operations.run_summary import RUNNING, Folders, RunEntry

LEG_DIR_SUFFIX = "-"  # a leg's folder is <wave id>-<n>


@cache
def code_version() -> str:
    """A digest of the source of the code that makes and stores the summaries: a summary
    file written by other code is never read."""
    digest = hashlib.sha256()
    for source in (run_summary.__file__, __file__):
        try:
            digest.update(Path(source).read_bytes())
        except OSError:
            digest.update(os.urandom(8))  # no source to read: trust no file
    return digest.hexdigest()[:16]


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _leg_of(name: str) -> str | None:
    """The wave a leg's folder name ``<wave id>-<n>`` names, else None."""
    wave, sep, n = name.rpartition(LEG_DIR_SUFFIX)
    return wave if sep and wave and n.isdigit() else None


class RunIndex:
    """Every run under ``runs_dir`` (and the benches of ``bench_dir``), newest first;
    thread-safe (the UI answers requests in threads)."""

    def __init__(self, runs_dir: Path, bench_dir: Path | None = None,
                 cache_dir: Path | None = None) -> None:
        self.runs_dir, self.bench_dir = runs_dir, bench_dir
        key = hashlib.sha256(str(runs_dir.resolve()).encode()).hexdigest()[:16]
        self.cache_file = cache_dir / f"runs-{key}.json" if cache_dir else None
        self._known: dict[str, tuple[list[int], dict[str, Any]]] | None = None
        self._benches: tuple[Any, list[RunEntry]] | None = None
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._writer: threading.Thread | None = None
        self._made = self._written = 0  # snapshots taken, and the newest one written
        self._out: tuple[tuple, list[RunEntry]] | None = None  # the last list, what made it
        self.read = 0  # records read (not found in the cache) since start: for tests, bench

    # -- the persisted summaries ------------------------------------------------------------
    def _load(self) -> dict[str, tuple[list[int], dict[str, Any]]]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != code_version() \
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
                                        daemon=True, name="orch-run-index")
        self._writer.start()

    def flush(self) -> None:
        """Wait for the last write of the summaries (a command before it exits, tests)."""
        if self._writer is not None:
            self._writer.join()

    def _write(self, n: int, known: dict[str, tuple[list[int], dict[str, Any]]]) -> None:
        from orchestrator.store import write_json_atomic

        with self._writing:
            if n <= self._written:  # a newer snapshot is already on disk
                return
            self._written = n
            if not self.cache_file.parent.parent.is_dir():
                return  # no ORCH_HOME yet: a listing leaves no trace
            try:
                self.cache_file.parent.mkdir(exist_ok=True)
                write_json_atomic(self.cache_file, {
                    "version": code_version(), "runs_dir": str(self.runs_dir.resolve()),
                    "rows": {k: [list(s), r] for k, (s, r) in known.items()}})
            except (OSError, ValueError, TypeError):
                pass  # a read-only home: the summaries stay in memory only

    # -- the listing ------------------------------------------------------------------------
    def entries(self) -> list[RunEntry]:
        """Every run, newest first."""
        from orchestrator.operations.benches import BENCH_OF

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
            legs: dict[str, list[str]] = {}  # wave id -> its legs' folders
            benches: list[str] = []
            orphans: set[str] = set()  # waves known only from their legs' folders
            changed = live = False
            known = self._known
            for name in names:  # strings, not Paths: this loop runs once per run per listing
                if name.startswith(("bench-", "council-bench-")) and BENCH_OF.match(name):
                    benches.append(name)
                    continue
                wave = _leg_of(name)
                if wave is not None and wave in present:
                    legs.setdefault(wave, []).append(name)
                    continue  # a leg's folder: its wave is listed
                record = f"{base}/{name}/" + ("run.json" if name.startswith("council-")
                                              else "wave.json")
                stamp = _stamp(record)
                if stamp is None and not name.startswith("council-") and "-" in name:
                    record = f"{base}/{name}/run.json"
                    stamp = _stamp(record)
                if stamp is None:
                    if wave is not None and os.path.exists(f"{base}/{name}/metadata.json"):
                        orphans.add(wave)
                        legs.setdefault(wave, []).append(name)
                    continue
                held = known.get(name)
                if held is not None and held[0][0] == stamp[0] and held[0][1] == stamp[1] \
                        and held[1]["status"] not in RUNNING:
                    found[name] = held
                    continue
                self.read += 1
                row = run_summary.wave(self.runs_dir, name, Path(record)) \
                    if record.endswith("/wave.json") else run_summary.run(name, Path(record))
                found[name] = (list(stamp), row)
                live = live or row["status"] in RUNNING
                changed = changed or row["status"] not in RUNNING
            # a wave whose folder has no record (wave.json deleted, never written) is known
            # from its legs as well
            orphans |= {w for w in legs if w not in found and w not in orphans}
            for wave_id in orphans:  # no wave.json yet: rebuilt from the legs each time
                self.read += 1
                found[wave_id] = ([0, 0], run_summary.orphan(
                    self.runs_dir, wave_id, self.runs_dir / legs[wave_id][0]))
            if changed or len(found) - len(orphans) != len(known):
                self._known = {k: v for k, v in found.items() if k not in orphans}
                self._save()
            bench_rows = self._bench_entries(benches)
            key = (tuple(found), tuple(len(v) for v in legs.values()), id(bench_rows))
            same = not changed and not live and not orphans and self._out is not None \
                and self._out[0] == key
            if same:  # nothing read, nothing came or went: the list made last time
                return self._out[1]
            out = [self._entry(name, row, legs, name in present)
                   for name, (_, row) in found.items()]
            out += bench_rows
            out.sort(key=lambda e: e.created_at, reverse=True)
            self._out = key, out
        return out

    def _entry(self, name: str, row: dict[str, Any], legs: dict[str, list[str]],
               own: bool) -> RunEntry:
        """A summary with the run's folders: its own (none for a wave known only from its
        legs) and its legs'."""
        return RunEntry(**row, dirs=Folders(self.runs_dir, name if own else None,
                                            legs.get(name, [])))

    def _bench_entries(self, folders: list[str]) -> list[RunEntry]:
        """The benches; read again when a bench file or a bench folder came or went, or while
        one runs."""
        from orchestrator.operations.benches import benches

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
        rows = benches(self.bench_dir, self.runs_dir)
        self._benches = (key, rows)
        return rows
