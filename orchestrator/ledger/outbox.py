"""The ledger's outbox: billed rows the ledger could not take in time, kept until it can.

A provider that answered has billed; its row must not vanish because the database was
locked or its disk was full. Such a row is appended to an append-only journal — one JSON
line, fsync'd before the leg moves on — beside the ledger, or in a fallback directory when
that disk refuses it. The next command that opens the ledger replays the journal into it
(``orch spend`` says "replayed N rows") and empties it.

Exactly once: a leg's row carries ``seq`` (how many of its billed requests it holds) and the
ledger's unique key on ``(wave_id, leg_id)`` lets a write only move that row forward, so a
replay killed between its write and the journal's rewrite, a line behind the row the ledger
holds, or two hosts replaying one journal never count a request twice. A row journaled by an
orch from before ``seq`` is inserted only when the ledger lacks its ``(wave_id, leg_id)``.

Other tables in the ledger's database journal a whole batch as one line (``{"table": ...,
"rows": [...]}``): a council run's rows (table ``council``) go in together or not at all, and
replay skips a run the table already holds.

The search index's docs (:mod:`orchestrator.ledger.search_table`) have a journal of their own
(``ledger-index-*.jsonl``, same places, own lock), so a large or stuck index never holds a
billed row's line up; it is capped (``INDEX_JOURNAL_MAX``: past it a doc is left out, and
``orch runs search --reindex`` recovers it from the run's folder) and replayed after the rows,
for at most ``INDEX_REPLAY_S``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOCK_WAIT_S = 5.0  # an appender waits this long for a replay to let go, then falls back
INDEX_JOURNAL_MAX = 64 * 2**20  # bytes of search docs kept waiting, per location
INDEX_REPLAY_S = 1.0  # the most an open spends putting journaled docs into the index


def fingerprint(url: str) -> str:
    """The journal's name for the ledger at ``url``; a password is left out, so rows spooled
    before a password change still replay after it (the request journal shares it)."""
    try:
        import sqlalchemy as sa

        parsed = sa.make_url(url)
        if parsed.password is not None:  # every password renders as the same "***"
            url = parsed.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL: the text itself names the journal
        pass
    return hashlib.sha256(url.encode()).hexdigest()[:12]


def locations(url: str) -> list[Path]:
    """Where outbox journals for the ledger at ``url`` may be, preferred first: beside a
    SQLite ledger (else in ORCH_HOME), then the fallback directory (``ORCH_OUTBOX_DIR``,
    else a per-user directory under the system's temporary directory)."""
    from orchestrator import config

    name = f"ledger-outbox-{fingerprint(url)}.jsonl"
    first = config.home()
    try:
        import sqlalchemy as sa

        parsed = sa.make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database and \
                parsed.database != ":memory:" and not parsed.database.startswith("file:"):
            first = Path(parsed.database).expanduser().parent
    except Exception:
        pass
    from orchestrator import keys

    fallback = Path(keys.setting("ORCH_OUTBOX_DIR")  # a run's own, under orch serve
                    or Path(tempfile.gettempdir()) / f"orch-outbox-{os.getuid()}")
    return [first / name, fallback / name] if fallback != first else [first / name]


def encode(row: dict[str, Any]) -> str:
    """One journal line. Anything JSON cannot hold is written as its text: a row that cannot
    be serialised is still a billed request, and its numbers are plain numbers."""
    stamped = {**row, "ts": _iso(row.get("ts"))}
    try:
        return json.dumps({"row": stamped}, default=str)
    except (TypeError, ValueError):  # e.g. a circular value: keep what is plain
        plain = {k: v if isinstance(v, str | int | float | bool | type(None)) else repr(v)
                 for k, v in stamped.items()}
        return json.dumps({"row": plain})


def _iso(ts: Any) -> str:
    if isinstance(ts, datetime):
        return ts.astimezone(UTC).isoformat()
    return ts if isinstance(ts, str) else datetime.now(UTC).isoformat()


@contextlib.contextmanager
def _locked(path: Path, *, wait_s: float) -> Iterator[int]:
    """The journal opened for appending under an exclusive lock. A replay renames the file
    when it is done; an fd opened before that would write into the replaced inode, so the
    lock holder checks it has the file that is at ``path`` now."""
    deadline = time.monotonic() + wait_s
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{path} is locked by a replay") from None
                    time.sleep(0.02)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:  # a replay emptied it: open it anew
                same = False
            if same:
                yield fd
                return
        finally:
            os.close(fd)


def append(url: str, row: dict[str, Any]) -> Path:
    """Journal ``row`` durably; the path it went to. Raises OSError when no location takes
    it (the caller says so: the row is then only in the leg's metadata.json)."""
    from orchestrator.ledger.schema import stamp

    # who and where: here, not the replayer
    return _journal(url, (encode(stamp(row)) + "\n").encode("utf-8"))


def append_batch(url: str, table: str, rows: list[dict[str, Any]]) -> Path:
    """Journal rows of another table of the ledger (``council``, ``council_vote``) as one
    line: replayed in one transaction, all or none. Raises OSError as :func:`append`
    does."""
    if table not in _BATCH_TABLES:
        raise ValueError(f"the outbox journals no table named {table!r}")
    batch = [{**r, "ts": _iso(r.get("ts"))} for r in rows]
    return _journal(url, (json.dumps({"table": table, "rows": batch}, default=str)
                          + "\n").encode("utf-8"))


def index_locations(url: str) -> list[Path]:
    """Where the search index's journal for the ledger at ``url`` may be: beside the
    outbox, in each of its places."""
    return [p.with_name(p.name.replace("ledger-outbox-", "ledger-index-", 1))
            for p in locations(url)]


def append_index(url: str, docs: list[dict[str, Any]]) -> Path:
    """Journal search docs (already admitted: ``Doc.to_dict()``) as one line. Raises
    OSError when no location takes them, or each is full (``INDEX_JOURNAL_MAX``)."""
    line = (json.dumps({"docs": docs}, default=str) + "\n").encode("utf-8")
    return _journal(url, line, index_locations(url), cap=INDEX_JOURNAL_MAX)


def replay_index(ledger) -> int:
    """Put journaled search docs into the index, for at most ``INDEX_REPLAY_S``: how many.
    What it did not take (time, a refusal) stays for the next open."""
    from orchestrator.ledger.search_table import take_journaled

    total = 0
    for path in index_locations(ledger.url):
        if not path.exists():
            continue
        with contextlib.suppress(OSError):
            total += _replay_index_file(ledger, path, take_journaled)
    return total


def _replay_index_file(ledger, path: Path, take) -> int:
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            return 0
        with os.fdopen(os.dup(fd), "rb") as fh:
            lines = [line for line in fh.read().splitlines() if line.strip()]
        docs: list[dict[str, Any]] = []
        for line in lines:
            try:
                found = json.loads(line).get("docs")
                docs += [d for d in found if isinstance(d, dict)]
            except (ValueError, AttributeError, TypeError):
                continue  # unreadable: an index doc is derived data, --reindex rebuilds it
        try:
            taken = take(ledger, docs, seconds=INDEX_REPLAY_S)
        except Exception:  # noqa: BLE001 - the index refused: they wait for the next open
            return 0
        rest = docs[taken:]
        _rewrite(path, [json.dumps({"docs": rest}, default=str).encode()] if rest else [])
        return taken
    finally:
        os.close(fd)


def _journal(url: str, line: bytes, paths: list[Path] | None = None, *,
             cap: int | None = None) -> Path:
    errors: list[str] = []
    for path in paths if paths is not None else locations(url):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(path, wait_s=LOCK_WAIT_S) as fd:
                size = os.fstat(fd).st_size
                if cap is not None and size + len(line) > cap:
                    raise OSError(f"{path} holds {size:,} bytes, its most")
                try:
                    written = os.write(fd, line)
                    if written != len(line):
                        raise OSError(f"short write to {path}")
                    os.fsync(fd)
                except OSError:
                    os.ftruncate(fd, size)  # never leave half a line for the replay to choke on
                    raise
            return path
        except (OSError, TimeoutError) as exc:
            errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
    raise OSError("no outbox location took the row (" + "; ".join(errors) + ")")


def _take_council(ledger, batches: list[list[dict[str, Any]]]) -> tuple[set[int], int]:
    from orchestrator.ledger.council_table import take_journaled  # its table, its rule of "once"

    return take_journaled(ledger, batches)


def _take_votes(ledger, batches: list[list[dict[str, Any]]]) -> tuple[set[int], int]:
    from orchestrator.ledger.vote_table import take_journaled  # its table, its rule of "once"

    return take_journaled(ledger, batches)


# table -> taker(ledger, batches): (indexes of the batches the ledger now holds, rows added)
_BATCH_TABLES = {"council": _take_council, "council_vote": _take_votes}


def pending(url: str) -> int:
    """Rows waiting in this ledger's outboxes."""
    total = 0
    for path in locations(url):
        with contextlib.suppress(OSError):
            total += sum(_rows_in(line) for line in path.read_bytes().splitlines()
                         if line.strip())
    return total


def journaled(url: str) -> list[dict[str, Any]]:
    """The spend rows waiting in this ledger's outboxes, read without taking them (a line
    that cannot be read is skipped here and kept in the journal)."""
    rows = []
    for path in locations(url):
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                doc = json.loads(line)
                if isinstance(doc, dict) and isinstance(doc.get("row"), dict):
                    rows.append(_decode(doc["row"]))
            except (ValueError, TypeError):
                continue
    return rows


def _rows_in(line: bytes) -> int:
    try:
        return max(1, len(json.loads(line).get("rows") or ()))
    except (ValueError, AttributeError, TypeError):
        return 1


def replay(ledger) -> int:
    """Move every journaled row of ``ledger`` into it; the number of rows it took. A failure
    leaves the journal as it was (the next command tries again); a replay already under way
    in another process is left to finish."""
    total = 0
    for path in locations(ledger.url):
        if not path.exists():
            continue
        with contextlib.suppress(OSError):
            total += _replay_file(ledger, path)
    return total


def _replay_file(ledger, path: Path) -> int:
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # someone else replays or appends right now
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            return 0
        with os.fdopen(os.dup(fd), "rb") as fh:
            lines = fh.read().splitlines()
        rows, kept = [], []
        batches: dict[str, list[tuple[bytes, list[dict[str, Any]]]]] = {}
        for line in lines:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                if "table" in doc and doc["table"] in _BATCH_TABLES:
                    batches.setdefault(doc["table"], []).append(
                        (line, [_decode(r) for r in doc["rows"]]))
                else:
                    rows.append(_decode(doc["row"]))
            except (ValueError, KeyError, TypeError, AttributeError):
                kept.append(line)  # unreadable: keep it for a person, never drop it
        taken, inserted = ledger.take_outbox(rows) if rows else (set(), 0)
        kept += [encode(r).encode() for n, r in enumerate(rows) if n not in taken]
        for table, journaled in batches.items():
            try:
                done, added = _BATCH_TABLES[table](ledger, [b for _, b in journaled])
            except Exception:  # noqa: BLE001 - the ledger refused: they wait for the next open
                done, added = set(), 0
            kept += [line for n, (line, _) in enumerate(journaled) if n not in done]
            inserted += added
        _rewrite(path, kept)
        return inserted
    finally:
        os.close(fd)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    ts = row.get("ts")
    row["ts"] = datetime.fromisoformat(ts) if isinstance(ts, str) else None
    return row


def _rewrite(path: Path, kept: list[bytes]) -> None:
    """Replace the journal with what is left (often nothing), atomically."""
    if not kept:
        os.unlink(path)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"".join(line + b"\n" for line in kept))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
