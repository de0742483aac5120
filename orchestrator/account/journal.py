"""The request journal: every request written down, fsync'd, before it goes on the wire.

A provider bills a request it answers whether or not orch lives to record the answer. The
ledger row of an answered request is made the moment the answer is billed; between sending
and that moment a ``kill -9`` would leave nothing behind. So each request is first journaled
— one JSON line in the wave's journal file, its claim (the most it can cost) included — and
is *settled* when its answer is recorded: the leg's durable row (ledger, or its outbox)
holds that answer (``seq`` >= the request's number) or says the leg ended. Nothing is
written to settle it, so a request costs one append and one ``fdatasync``
(docs/performance.md).

A wave that ends removes its file; a killed one leaves it. Its unsettled requests are
"in flight at the kill: may be billed, at most $X": ``orch status``, ``orch spend`` and
``orch bench resume`` say so, and a run's account (``account/held.py``) counts each at its
claim. Files live beside the ledger's outbox (``ledger-requests-<hash>/<wave id>.jsonl``),
or in the outbox's fallback directory when that disk refuses them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SUFFIX = ".jsonl"


def folders(url: str) -> list[Path]:
    """Where the journal files of the ledger at ``url`` may be, preferred first."""
    from orchestrator.ledger import outbox

    return [path.parent / f"ledger-requests-{outbox.fingerprint(url)}"
            for path in outbox.locations(url)]


def _name(wave_id: str) -> str:
    return wave_id.replace("/", "_").replace("\x00", "") + SUFFIX


class WaveJournal:
    """One wave's journal file, opened at its first request and kept open: a request costs
    one ``write`` and one ``fdatasync``. Thread-safe (a wave journals from worker threads)."""

    def __init__(self, url: str, wave_id: str, run_id: str | None) -> None:
        self.url, self.wave_id, self.run_id = url, wave_id, run_id
        self.path: Path | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._started: str | None = None

    def sent(self, leg_id: str, n: int, model: str, claim_usd: float | None) -> None:
        """Journal the leg's request ``n`` (the answer it would be) before it is sent.
        Blocking (an fsync): call it on a worker thread. Raises OSError when no location
        takes it."""
        if self._started is None:
            from orchestrator.pids import process_started

            self._started = process_started(self._pid) or ""
        entry = {"wave_id": self.wave_id, "leg_id": leg_id, "run_id": self.run_id, "n": n,
                 "model": model, "claim_usd": None if claim_usd is None else round(claim_usd, 8),
                 "pid": self._pid, "pid_started": self._started or None,
                 "ts": datetime.now(UTC).isoformat(timespec="milliseconds")}
        line = (json.dumps({"sent": entry}) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            size = os.fstat(self._fd).st_size
            try:
                if os.write(self._fd, line) != len(line):
                    raise OSError(f"short write to {self.path}")
                os.fdatasync(self._fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, size)  # never half a line
                raise

    def _open(self) -> None:
        errors = []
        for folder in folders(self.url):
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                path = folder / _name(self.wave_id)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                _sync_dir(folder)  # the new name survives a crash as well as the lines
            except OSError as exc:
                errors.append(f"{folder}: {exc.strerror or exc}")
                continue
            self._fd, self.path = fd, path
            return
        raise OSError("no location took the request journal (" + "; ".join(errors) + ")")

    def close(self, *, keep: bool = False) -> None:
        """The wave is over: its requests are all settled (each leg's end is recorded), so
        the file goes, unless ``keep`` (a leg's end could not be recorded anywhere)."""
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
            if self.path is not None and not keep:
                with contextlib.suppress(OSError):
                    self.path.unlink()


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class InFlight:
    """A request journaled and never settled."""

    wave_id: str
    leg_id: str
    run_id: str | None
    n: int
    model: str
    claim_usd: float | None  # the most it can cost; None: its price is unknown
    ts: str
    alive: bool  # its process still runs (in flight now, not at a kill)

    def to_dict(self) -> dict[str, Any]:
        return {"wave_id": self.wave_id, "leg_id": self.leg_id, "run_id": self.run_id,
                "request": self.n, "model": self.model, "at_most_usd": self.claim_usd,
                "sent_at": self.ts, "alive": self.alive}


def _entries(url: str, wanted) -> dict[tuple[str, str], tuple[dict[str, Any], Path]]:
    """(wave, leg) -> its latest journaled request (and its file), over the files whose wave
    ``wanted(wave_id)`` accepts."""
    latest: dict[tuple[str, str], tuple[dict[str, Any], Path]] = {}
    for folder in folders(url):
        try:
            files = sorted(folder.glob("*" + SUFFIX))
        except OSError:
            continue
        for path in files:
            if not wanted(path.name[:-len(SUFFIX)]):
                continue
            try:
                lines = path.read_bytes().splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    entry = json.loads(line)["sent"]
                    key = (str(entry["wave_id"]), str(entry["leg_id"]))
                    n = int(entry["n"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line: nothing was sent after it
                held = latest.get(key)
                if held is None or n >= int(held[0]["n"]):
                    latest[key] = (entry, path)
    return latest


def unsettled(url: str | None = None, *, prefix: str | None = None,
              waves: Iterable[str] = (), ledger: bool = True) -> list[InFlight]:
    """The journaled requests the durable record does not settle, of the waves whose id is
    in ``waves`` or starts with ``prefix`` (both None: every wave). ``ledger`` False: only
    the outbox settles them (the ledger did not answer). A dead process's file whose
    requests are all settled is removed on the way."""
    from orchestrator.ledger.billed import billed_waves
    from orchestrator.ledger.connection import default_url
    from orchestrator.pids import same_process

    url = url or default_url()
    exact = frozenset(waves)
    everything = prefix is None and not exact

    def wanted(wave_id: str) -> bool:
        return everything or wave_id in exact or (prefix is not None
                                                  and wave_id.startswith(prefix))

    latest = _entries(url, wanted)
    if not latest:
        return []
    billed = billed_waves("", url, waves=frozenset(w for w, _ in latest), ledger=ledger)
    out, files_open = [], {}
    for (wave_id, leg_id), (entry, path) in sorted(latest.items()):
        row = billed.get(wave_id, {}).get(leg_id)
        settled = row is not None and ((row.seq or 0) >= int(entry["n"]) or row.ended)
        alive = same_process(entry.get("pid"), entry.get("pid_started"))
        files_open.setdefault(path, False)
        if settled:
            continue
        files_open[path] = True
        claim = entry.get("claim_usd")
        out.append(InFlight(wave_id=wave_id, leg_id=leg_id, run_id=entry.get("run_id"),
                            n=int(entry["n"]), model=str(entry.get("model") or ""),
                            claim_usd=float(claim) if isinstance(claim, int | float) else None,
                            ts=str(entry.get("ts") or ""), alive=alive))
    living = {e.wave_id for e in out if e.alive}
    for path, still in files_open.items():  # a killed wave's file, every request settled
        if not still and path.name[:-len(SUFFIX)] not in living:
            _drop_if_dead(path)
    return out


def _drop_if_dead(path: Path) -> None:
    from orchestrator.pids import same_process

    try:
        lines = path.read_bytes().splitlines()
        owners = {(e.get("pid"), e.get("pid_started")) for e in
                  (json.loads(x).get("sent") or {} for x in lines if x.strip())}
    except (OSError, ValueError, AttributeError):
        return
    if not any(same_process(pid, started) for pid, started in owners):
        with contextlib.suppress(OSError):
            path.unlink()


def summary(entries: list[InFlight], since: datetime | None = None) -> dict[str, Any]:
    """``{"requests", "at_most_usd", "unpriced", "legs"}`` of requests in flight at a kill
    (alive ones are left out: they are in flight now), sent since ``since`` if given."""
    dead = [e for e in entries if not e.alive and (since is None or _sent_at(e) >= since)]
    return {"requests": len(dead),
            "at_most_usd": round(sum(e.claim_usd or 0.0 for e in dead), 8),
            "unpriced": sum(1 for e in dead if e.claim_usd is None),
            "legs": [e.to_dict() for e in dead]}


def _sent_at(entry: InFlight) -> datetime:
    try:
        moment = datetime.fromisoformat(entry.ts)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def at_kill(url: str | None = None, *, prefix: str | None = None, waves: Iterable[str] = (),
            since: datetime | None = None) -> dict[str, Any]:
    """:func:`summary` of the unsettled requests of those waves (see :func:`unsettled`); a
    record that cannot be read says nothing rather than fail a status."""
    try:
        return summary(unsettled(url, prefix=prefix, waves=waves), since)
    except Exception:  # noqa: BLE001 - a reader's extra line, never its failure
        return summary([])


def words(found: dict[str, Any]) -> str | None:
    """The one line every face prints: "N request(s) in flight at the kill: may be billed,
    at most $X"; None when there are none."""
    n = found.get("requests") or 0
    if not n:
        return None
    most = f"at most ${found['at_most_usd']:.4f}"
    if found.get("unpriced"):
        most += f" (+ {found['unpriced']} of unknown price)"
    return f"{n} request(s) in flight at the kill: may be billed, {most}"
