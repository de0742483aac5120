"""The spend ledger: one row per model call (leg, chair, seat, judge...), rolled up by ``orch spend``.

Rows live in SQLite (``<ORCH_HOME>/ledger.db``) or any SQLAlchemy URL in ``ORCH_LEDGER_URL``
(PostgreSQL for a team: ``postgresql+psycopg://...``), so several orch processes, or a whole
team, can share one ledger. A cost is recorded only when it is known: ``cost_usd`` null means
unknown, and totals over such rows are floors, never guesses. The ledger stores what it is
given, stamped with who and where (``user``, ``host``); callers pass usage and cost, never keys.

The row and its vocabulary live in :mod:`orchestrator.ledger.schema`, the connection in
:mod:`orchestrator.ledger.connection`, the schema's version in :mod:`orchestrator.ledger.migrate`.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.ledger import connection as ledger_engine
from orchestrator.ledger import migrate as ledger_migrate
from orchestrator.ledger.connection import BUSY_TIMEOUT_MS, default_url
from orchestrator.ledger.schema import (  # noqa: F401 - the names callers import from here
    COLUMNS,
    COST_SOURCES,
    DEFAULTS,
    GROUP_BY,
    IN_FLIGHT,
    LEG_KEY,
    LEG_KEY_WHERE,
    REQUIRED,
    ROUND_INFIX,
    STATUSES,
    TABLE,
    TOKENS,
    SpendRow,
    UTCDateTime,
    stamp,
    storable,
    utcnow,
)

WRITE_ATTEMPTS = 5  # on top of SQLite's own busy_timeout wait
_redact = ledger_engine.redact
_is_locked = ledger_engine.is_locked
SchemaOutOfDate = ledger_migrate.SchemaOutOfDate


# --- the ledger ---------------------------------------------------------------------------------


class Ledger:
    """Append spend rows and roll them up. Opening checks the schema's revision: an empty
    database is created at head, an older one is a one-line error naming `orch ledger upgrade`
    (:class:`SchemaOutOfDate`)."""

    def __init__(self, url: str | None = None, *, replay: bool = True):
        raw = url or default_url()
        self.url = raw
        self.location = _redact(raw)  # safe to print: the password, if any, is masked
        try:
            parsed = sa.make_url(raw)
        except sa_exc.ArgumentError:
            raise OrchError(
                f"spend ledger URL {self.location!r} is not a SQLAlchemy URL; fix ORCH_LEDGER_URL "
                "(e.g. sqlite:////path/ledger.db or postgresql://user@host/db)"
            ) from None
        if parsed.get_backend_name() == "sqlite":
            self._make_parent(parsed.database)
        try:
            self.engine = ledger_engine.engine(parsed)
            ledger_migrate.ensure(self.engine, self.location)
        except ImportError as exc:
            extra = " (pip install 'orch[postgres]')" if "psycopg" in str(exc.name) else ""
            raise OrchError(
                f"spend ledger {self.location}: database driver not installed "
                f"({exc.name or exc}){extra}") from None
        except sa_exc.SQLAlchemyError as exc:
            raise OrchError(f"cannot open spend ledger {self.location}: "
                            f"{ledger_engine.brief(exc, raw)}") from None
        # Rows a command before could not write wait in the outbox: this open takes them.
        self.replayed = 0
        if replay:
            from orchestrator.ledger import outbox

            self.replayed = outbox.replay(self)
            outbox.replay_index(self)  # the search index's waiting docs, after the rows

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    def _make_parent(self, database: str | None) -> None:
        if not database or database == ":memory:" or database.startswith("file:"):
            return
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OrchError(f"cannot create the spend ledger's directory: {exc}") from None

    @contextmanager
    def _reporting(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sa_exc.SQLAlchemyError as exc:
            raise OrchError(f"spend ledger {self.location}: cannot {doing}: "
                            f"{ledger_engine.brief(exc, self.url)}") from None

    # -- writing

    def append(self, row: dict[str, Any]) -> None:
        """Record one call. Unknown fields or missing required ones are a caller bug: ValueError."""
        self.append_many([row])

    def append_many(self, rows: Iterable[dict[str, Any]], *,
                    deadline: float | None = None) -> None:
        """Record several calls in one transaction (all or none). ``deadline`` (a
        ``time.monotonic()``) bounds the whole call, lock waits and retries included: a
        SQLite ledger's busy timeout shrinks to what is left of it."""
        prepared = [_scrubbed(_prepare(r)) for r in rows]
        if not prepared:
            return
        with self._reporting("write"):
            for attempt in range(WRITE_ATTEMPTS):
                try:
                    with self.engine.begin() as conn:
                        self.bound(conn, deadline)
                        whole = [r for r in prepared if r["seq"] is None]
                        legs = _furthest([r for r in prepared if r["seq"] is not None])
                        if whole:
                            conn.execute(sa.insert(TABLE), whole)
                        if legs:
                            conn.execute(self._forward(), legs)
                    return
                except sa_exc.OperationalError as exc:
                    last = attempt == WRITE_ATTEMPTS - 1 or (
                        deadline is not None and time.monotonic() >= deadline)
                    if not _is_locked(exc) or last:
                        raise
                    time.sleep(0.05 * 2**attempt + random.uniform(0, 0.05))

    def _forward(self):
        """The write of a leg's durable row (one with ``seq``): insert it, or move the row
        the ledger holds forward — to more billed requests, or from in flight to the leg's
        end at the same count. Never back: a replayed journal line, a write retried after
        its commit, or a second host replaying the same journal changes nothing. The
        database's unique key decides (``ux_spend_leg``), not a read before the write."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif self.engine.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:  # pragma: no cover - the two backends orch is tested on
            raise OrchError(f"spend ledger {self.location}: per-request rows need SQLite or "
                            "PostgreSQL")
        stmt = insert(TABLE)
        new, held = stmt.excluded, TABLE.c
        forward = (held.seq < new.seq) | (
            (held.seq == new.seq) & (held.status == "aborted") & (held.reason == IN_FLIGHT))
        return stmt.on_conflict_do_update(
            index_elements=list(LEG_KEY), index_where=LEG_KEY_WHERE,
            set_={c.name: new[c.name] for c in TABLE.columns if c.name != "id"},
            where=forward)

    def bound(self, conn: sa.Connection, deadline: float | None) -> None:
        """Bound the lock wait of the operation on ``conn`` by ``deadline`` (a
        ``time.monotonic()``; None: the default 30 s): SQLite's busy timeout, PostgreSQL's
        statement timeout (a table another session locked would otherwise hold the leg
        forever). The bound ends with the operation: SQLite's connection goes back to the
        pool with its own timeout, PostgreSQL's ``SET LOCAL`` ends with the transaction."""
        left = BUSY_TIMEOUT_MS if deadline is None else \
            max(0, min(BUSY_TIMEOUT_MS, int((deadline - time.monotonic()) * 1000)))
        if self.engine.dialect.name == "sqlite":
            ledger_engine.busy_timeout(conn, left)
        elif self.engine.dialect.name == "postgresql":  # 0 would mean no limit at all
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, left)}")

    def take_outbox(self, rows: list[dict[str, Any]]) -> tuple[set[int], int]:
        """Write journaled rows the ledger does not hold yet: the indexes of the rows now in
        it (written, or found already there), and how many ledger rows that makes. A leg's
        durable row (with ``seq``) relies on the unique key — several journal lines of one
        leg (in flight, then its end) make one row. A row without ``seq`` (journaled by an
        orch before 0003) is inserted only when no row of its ``(wave_id, leg_id)`` is
        there. A row that cannot be written is left out and stays in the journal."""
        deadline = time.monotonic() + 2.0  # a replay never holds a command up for long
        keys = {(r.get("wave_id"), r.get("leg_id")) for r in rows if r.get("seq") is None}
        with self._reporting("read"), self.engine.connect() as conn:
            query = sa.select(TABLE.c.wave_id, TABLE.c.leg_id).where(
                TABLE.c.wave_id.in_({k[0] for k in keys if k[0]}))
            present = {tuple(r) for r in conn.execute(query)}
        taken = {n for n, r in enumerate(rows) if r.get("seq") is None
                 and (r.get("wave_id"), r.get("leg_id")) in present}
        todo = [n for n in range(len(rows)) if n not in taken]

        def counted(done: list[int]) -> int:  # one per leg, one per row without seq
            return len({(rows[n].get("wave_id"), rows[n].get("leg_id"))
                        if rows[n].get("seq") is not None else n for n in done})

        try:
            self.append_many([rows[n] for n in todo], deadline=deadline)
            return taken | set(todo), counted(todo)
        except (OrchError, ValueError, TypeError):
            pass
        done = []
        for n in todo:  # one bad row must not keep the others out
            try:
                self.append_many([rows[n]], deadline=deadline)
            except (OrchError, ValueError, TypeError):
                continue
            taken.add(n)
            done.append(n)
        return taken, counted(done)

    # -- reading

    def rows(self, since: datetime | None = None, wave_id: str | None = None,
             run_id: str | None = None, wave_prefix: str | None = None,
             wave_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rows oldest first, as plain dicts (``ts`` is an aware UTC datetime).
        ``wave_prefix``: the rows of every wave whose id starts with it (a bench's);
        ``wave_ids``: the rows of these waves (a retry's family)."""
        where = self._filters(since, wave_id, run_id)
        if wave_prefix is not None:
            where.append(TABLE.c.wave_id.startswith(wave_prefix, autoescape=True))
        if wave_ids is not None:
            where.append(TABLE.c.wave_id.in_(sorted(set(wave_ids))))
        query = sa.select(TABLE).where(*where)
        with self._reporting("read"), self.engine.connect() as conn:
            result = conn.execute(query.order_by(TABLE.c.ts, TABLE.c.id))
            return [dict(r._mapping) for r in result]

    def stream(self, since: datetime | None = None) -> Iterator[dict[str, Any]]:
        """Rows oldest first, fetched in batches: an export of a team's year stays small."""
        query = sa.select(TABLE).where(*self._filters(since, None, None))
        with self._reporting("read"), self.engine.connect() as conn:
            result = conn.execution_options(yield_per=1000).execute(
                query.order_by(TABLE.c.ts, TABLE.c.id))
            for r in result:
                yield dict(r._mapping)

    def rollup(self, since: datetime | None = None, group_by: str | None = None) -> dict[str, Any]:
        """Totals since ``since`` and, with ``group_by``, one entry per group: the ``orch spend
        --json`` contract. ``total_cost_usd`` sums known costs only, so it is a floor when
        ``unknown_cost_legs`` > 0."""
        if group_by is not None and group_by not in GROUP_BY:
            raise OrchError(f"cannot group spend by {group_by!r}; use one of {', '.join(GROUP_BY)}")
        c = TABLE.c
        failed = c.status != "complete"
        suspect = c.cost_source == "suspect"
        measures = [
            sa.func.count().label("legs"),
            *(sa.func.sum(c[name]).label(name) for name in TOKENS),
            sa.func.sum(c.cost_usd).label("cost_usd"),
            sa.func.sum(sa.case((c.cost_usd.is_(None), 1), else_=0)).label("unknown_cost_legs"),
            sa.func.sum(sa.case((failed, 1), else_=0)).label("failed_legs"),
            sa.func.sum(sa.case((failed, c.cost_usd), else_=None)).label("failed_cost_usd"),
            sa.func.sum(sa.case((suspect, 1), else_=0)).label("suspect_legs"),
            sa.func.sum(sa.case((suspect, c.cost_usd), else_=None)).label("suspect_cost_usd"),
            sa.func.sum(sa.case((c.cost_bound_usd.is_not(None), 1), else_=0)).label(
                "bounded_legs"),
            sa.func.sum(sa.func.coalesce(c.cost_bound_usd, c.cost_usd)).label("bound_cost_usd"),
        ]
        where = self._filters(since, None, None)
        with self._reporting("read"), self.engine.connect() as conn:
            totals = conn.execute(sa.select(*measures).where(*where)).one()
            grouped = []
            if group_by == "round":  # per wave in SQL, then folded by the wave id's round
                grouped = _by_round(conn.execute(
                    sa.select(c.wave_id, c.run_id, *measures).where(*where)
                    .group_by(c.wave_id, c.run_id)).all())
            elif group_by is not None:
                key = _group_key(group_by).label("key")
                grouped = conn.execute(
                    sa.select(key, *measures).where(*where).group_by(key)
                ).all()
        groups = [_group(r) for r in grouped]
        if group_by == "day":
            groups.sort(key=lambda g: g["key"] or "")
        elif group_by == "round":  # 1, 2, ..., 10, then the rest (a chair, repairs)
            groups.sort(key=lambda g: (g["key"] is None, not str(g["key"]).isdigit(),
                                       int(g["key"]) if str(g["key"]).isdigit() else 0,
                                       str(g["key"])))
        else:
            groups.sort(key=lambda g: (-g["cost_usd"], -g["legs"], g["key"] is None,
                                       str(g["key"])))
        return {
            "legs": _int(totals.legs),
            "total_cost_usd": _money(totals.cost_usd),
            "unknown_cost_legs": _int(totals.unknown_cost_legs),
            "failed_cost_usd": _money(totals.failed_cost_usd),
            "suspect_legs": _int(totals.suspect_legs),
            "suspect_cost_usd": _money(totals.suspect_cost_usd),
            # rows whose answers' cost could not all be read, and the most everything cost
            # (each such answer at its claim; a row of unknown price adds nothing)
            "bounded_legs": _int(totals.bounded_legs),
            "bound_cost_usd": _money(totals.bound_cost_usd),
            "groups": groups,
        }

    @staticmethod
    def _filters(since: datetime | None, wave_id: str | None, run_id: str | None) -> list:
        where = []
        if since is not None:
            where.append(TABLE.c.ts >= _as_utc(since))
        if wave_id is not None:
            where.append(TABLE.c.wave_id == wave_id)
        if run_id is not None:
            where.append(TABLE.c.run_id == run_id)
        return where

    def close(self) -> None:
        """Close pooled connections (the engine reconnects if used again)."""
        self.engine.dispose()


def _furthest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per leg: the one the unique key would keep. (PostgreSQL refuses a statement
    that updates one row twice; the same leg's in-flight and final rows may share a batch.)"""
    best: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = tuple(row[k] for k in LEG_KEY)
        held = best.get(key)
        if held is None or (row["seq"], row["reason"] != IN_FLIGHT) >= \
                (held["seq"], held["reason"] != IN_FLIGHT):
            best[key] = row
    return list(best.values())


def _group_key(group_by: str):
    c = TABLE.c
    return {"model": c.model, "wave": c.wave_id, "tag": c.tag, "status": c.status,
            "kind": c.kind, "user": c.user, "host": c.host,
            "day": sa.func.date(c.ts)}[group_by]


def round_of(wave_id: str, run_id: str | None) -> str | None:
    """The round a wave id names: what follows the last ``-round-`` of a wave of the run
    (``<run>-round-2``, a bench trial's ``<bench>-t0003-round-2``, ``-round-2-repair``,
    ``-round-chair``), else None."""
    if not run_id or not wave_id.startswith(run_id + "-"):
        return None
    rest = wave_id[len(run_id):]
    at = rest.rfind(ROUND_INFIX)
    if at < 0:
        return None
    return rest[at + len(ROUND_INFIX):] or None


def _by_round(rows) -> list:
    """Per-wave sums folded into one per round (a SQL ``substr`` cannot find the last
    ``-round-`` of a bench trial's wave id on both SQLite and PostgreSQL)."""
    from types import SimpleNamespace

    folded: dict[str | None, dict[str, Any]] = {}
    for r in rows:
        into = folded.setdefault(round_of(r.wave_id, r.run_id), {})
        for name, value in r._mapping.items():
            if name in ("wave_id", "run_id") or value is None:
                continue
            into[name] = into.get(name, 0) + value
    out = []
    for key, sums in folded.items():
        values = {name: sums.get(name) for name in ("legs", *TOKENS, "cost_usd",
                                                     "unknown_cost_legs", "failed_legs",
                                                     "failed_cost_usd", "suspect_legs",
                                                     "suspect_cost_usd")}
        out.append(SimpleNamespace(key=key, _mapping=values, **values))
    return out


def _group(r) -> dict[str, Any]:
    key = r.key
    if isinstance(key, date | datetime):
        key = key.isoformat()[:10]
    return {"key": key, "legs": _int(r.legs), **{name: _int(r._mapping[name]) for name in TOKENS},
            "cost_usd": _money(r.cost_usd), "unknown_cost_legs": _int(r.unknown_cost_legs),
            "failed_legs": _int(r.failed_legs), "suspect_legs": _int(r.suspect_legs)}


def _int(value) -> int:
    return int(value or 0)  # SUM is NULL over no rows, and a Decimal on some backends


def _money(value: float | None) -> float:
    return round(float(value or 0.0), 10)  # drop float noise, keep sub-cent precision


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _prepare(row: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and catch caller bugs early: a typo'd field would otherwise vanish."""
    unknown = set(row) - COLUMNS
    if unknown:
        raise ValueError(f"spend row has unknown fields: {', '.join(sorted(unknown))}")
    missing = [name for name in REQUIRED if row.get(name) is None]
    if missing:
        raise ValueError(f"spend row is missing: {', '.join(missing)}")
    _check_vocabulary(row)
    prepared = {**DEFAULTS, **{k: v for k, v in stamp(row).items() if v is not None}}
    prepared["ts"] = _as_utc(row.get("ts") or utcnow())
    for name in COLUMNS - prepared.keys():
        prepared[name] = None  # every row binds every column: one executemany statement
    return prepared


FREE_TEXT = ("reason", "tag")  # masked by value and by key shape; the rest by value only


def _scrubbed(row: dict[str, Any]) -> dict[str, Any]:
    """No key value reaches the database (or its WAL); identifiers keep their exact bytes."""
    from orchestrator.security.secrets import scrub, scrub_values

    return {k: storable((scrub if k in FREE_TEXT else scrub_values)(v)) if isinstance(v, str)
            else v for k, v in row.items()}


def _check_vocabulary(row: dict[str, Any]) -> None:
    """Statuses and cost sources from the documented vocabulary only; token counts that fit
    the column (usage is sanitised before it gets here: server.usage_of)."""
    if row["status"] not in STATUSES:
        raise ValueError(f"spend row status {row['status']!r} is not one of "
                         f"{', '.join(STATUSES)}")
    source = row.get("cost_source")
    if source is not None and source not in COST_SOURCES:
        raise ValueError(f"spend row cost_source {source!r} is not one of "
                         f"{', '.join(COST_SOURCES)}")
    for name in TOKENS:
        value = row.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 0 <= value < 2**63):
            raise ValueError(f"spend row {name} {value!r} is not a token count")
    seq = row.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)
                            or not 0 <= seq < 2**31):
        raise ValueError(f"spend row seq {seq!r} is not a request count")
    for name in ("cost_usd", "cost_bound_usd"):
        cost = row.get(name)
        if cost is not None and not (isinstance(cost, int | float) and math.isfinite(cost)
                                     and cost >= 0):
            raise ValueError(f"spend row {name} {cost!r} is not a number of dollars")


# --- reading --since ---------------------------------------------------------------------------

_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``30m``, ``24h``, ``7d``, ``2w`` ago, or an ISO date/datetime (UTC unless it says so)."""
    cleaned = (text or "").strip()
    match = _DURATION.match(cleaned.lower())
    if match:
        amount, unit = match.groups()
        try:
            return (now or utcnow()) - timedelta(**{_UNITS[unit]: int(amount)})
        except OverflowError:
            raise UsageProblem(f"--since {text!r} reaches back before the year 1; use "
                            "--since all for everything") from None
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        raise UsageProblem(
            f"cannot read --since {text!r}: use 30m, 24h, 7d, 2w, or an ISO date or datetime "
            "such as 2025-01-31 or 2025-01-31T09:00 (UTC unless an offset is given)"
        ) from None
    return _as_utc(moment)
