"""The ledger's database connection: one SQLAlchemy engine per URL per process, tuned per
backend, and a URL that is safe to print (its password masked, in errors too)."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from orchestrator import config

BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10  # a server that does not answer: the rows go to the outbox after this

_engines: dict[str, sa.Engine] = {}
_lock = threading.Lock()


def default_url() -> str:
    """``ORCH_LEDGER_URL`` (a run's own, under orch serve: orchestrator/keys.py), else the
    SQLite file in ORCH_HOME."""
    from orchestrator import keys

    env = keys.setting("ORCH_LEDGER_URL")
    if env:
        return env
    return f"sqlite:///{config.home() / 'ledger.db'}"


def missing_sqlite_file(url: str) -> str | None:
    """The path of a SQLite ledger at ``url`` that does not exist yet, else None."""
    try:
        parsed = sa.make_url(url)
    except sa_exc.ArgumentError:
        return None  # opening the ledger says what is wrong with the URL
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return None if os.path.exists(os.path.expanduser(database)) else database


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    """Readers never block the writer (WAL); writers queue instead of failing (busy_timeout)."""
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _to_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _to_wal(cursor) -> None:
    """Switching a new database to WAL takes an exclusive lock, and SQLite answers "database
    is locked" at once, without its busy handler, when racing first opens collide: wait here
    as long as a busy writer would be waited for."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


_OWN_TIMEOUT = "orch_busy_timeout"  # the connection's own busy timeout while a bound is set


def busy_timeout(conn: sa.Connection, ms: int) -> None:
    """SQLite's busy timeout for this checkout only: the pool gives the connection its own
    value back when it is returned (:func:`_restore_busy_timeout`), so one operation's short
    bound never becomes a later user's wait."""
    info = conn.info  # the pooled connection's record: kept across checkouts
    if _OWN_TIMEOUT not in info:
        info[_OWN_TIMEOUT] = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
    conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(ms)}")


def _restore_busy_timeout(dbapi_conn, record, state) -> None:
    """On return to the pool (an error here makes the pool discard the connection)."""
    own = record.info.pop(_OWN_TIMEOUT, None)
    if own is None or dbapi_conn is None or state.terminate_only:
        return
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(own)}")
    finally:
        cursor.close()


def engine(url: sa.URL) -> sa.Engine:
    """The process's engine for ``url`` (created without connecting)."""
    key = url.render_as_string(hide_password=False)
    with _lock:
        found = _engines.get(key)
        if found is None:
            found = _create(url)
            _engines[key] = found
        return found


def _create(url: sa.URL) -> sa.Engine:
    backend = url.get_backend_name()
    if url.drivername == "postgresql":  # SQLAlchemy's default is psycopg2; orch ships psycopg 3
        url = url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        created = sa.create_engine(url)
        sa.event.listen(created, "connect", _sqlite_pragmas)
        sa.event.listen(created, "reset", _restore_busy_timeout)
        return created
    connect_args = {}
    if backend == "postgresql" and "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    # pre_ping: a pooled connection the server dropped (restart, idle timeout) is replaced
    return sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True)


def forget_engines() -> None:
    """A forked child must not reuse its parent's pooled connections."""
    for found in _engines.values():
        found.dispose(close=False)
    _engines.clear()


def dispose_all() -> None:
    """Close every pooled connection and forget the engines (tests, between databases)."""
    with _lock:
        for found in _engines.values():
            found.dispose()
        _engines.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=forget_engines)


def redact(url: str) -> str:
    """``url`` with its password shown as ``***``: the only form of it orch prints."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa_exc.ArgumentError:
        return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url)


def mask(text: str, url: str) -> str:
    """``text`` (a driver's error, say) with the URL's password, if any, masked."""
    try:
        password = sa.make_url(url).password
    except sa_exc.ArgumentError:
        match = re.search(r"//[^:/@]*:([^@/]*)@", url)
        password = match.group(1) if match else None
    if password:
        text = text.replace(str(password), "***")
    return text


def brief(exc: BaseException, url: str | None = None) -> str:
    """The first line of a database error, password masked."""
    text = str(exc.orig) if isinstance(exc, sa_exc.DBAPIError) else str(exc)
    line = (text.strip().splitlines() or [type(exc).__name__])[0]
    return mask(line, url) if url else line


def is_locked(exc: sa_exc.OperationalError) -> bool:
    text = str(exc.orig).lower()
    return "database is locked" in text or "database is busy" in text
