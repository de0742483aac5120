"""The ledger's schema version: checked on every open, created at head on an empty database,
and upgraded by ``orch ledger upgrade`` (Alembic, the migrations in orchestrator/ledger/migrations,
the same ones on SQLite and PostgreSQL).

Opening a ledger that is at head costs two small queries and never imports Alembic. An empty
database (no ledger tables) is created at head on first use, so a single user's set-up stays
two commands. A ledger at an older revision, or one made before migrations existed, is not
changed behind anyone's back: opening it is a one-line error naming ``orch ledger upgrade``.
Migrations run under a lock (a PostgreSQL advisory lock; a file lock beside a SQLite file),
so racing first opens create the schema once.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from orchestrator.errors import OrchError
from orchestrator.ledger.schema import HEAD

TABLES = ("spend", "council")
ADVISORY_KEY = 0x6F72636867  # "orchg": one PostgreSQL advisory lock for orch's migrations
MIGRATIONS = Path(__file__).parent / "migrations"

_ready: weakref.WeakSet = weakref.WeakSet()  # engines checked at head in this process
_thread_lock = threading.Lock()


class SchemaOutOfDate(OrchError):
    """The ledger needs ``orch ledger upgrade`` (or a newer orch) before it can be used."""


def state(conn: sa.Connection) -> tuple[str | None, bool]:
    """(the database's revision or None, whether any ledger table exists)."""
    inspector = sa.inspect(conn)
    names = set(inspector.get_table_names())
    revision = None
    if "alembic_version" in names:
        revision = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    return revision, bool(names & set(TABLES))


def ensure(engine: sa.Engine, location: str) -> None:
    """Return when the ledger is at head; create it there when the database is empty."""
    if engine in _ready:
        return
    with engine.connect() as conn:
        revision, tables = state(conn)
    if revision != HEAD:
        # another process may be creating it right now (its tables made, not yet stamped):
        # read again under the migrations' lock, which that process holds until it is done
        with _exclusive(engine) as conn:
            revision, tables = state(conn)
    if revision != HEAD:
        if revision is None and not tables:
            upgrade(engine, location)  # a new ledger: made at head, under the lock
        else:
            raise out_of_date(location, revision)
    _ready.add(engine)


def out_of_date(location: str, revision: str | None) -> SchemaOutOfDate:
    if revision is None:
        return SchemaOutOfDate(
            f"spend ledger {location} was made before schema versions; run `orch ledger "
            f"upgrade` to bring it to revision {HEAD} (its rows are kept)")
    if revision in known():
        return SchemaOutOfDate(
            f"spend ledger {location} is at schema revision {revision}, this orch needs "
            f"{HEAD}; run `orch ledger upgrade` (its rows are kept)")
    return SchemaOutOfDate(
        f"spend ledger {location} is at schema revision {revision}, newer than this orch "
        f"knows ({HEAD}); upgrade orch on this machine")


def known() -> list[str]:
    """Every revision the migrations define, oldest first."""
    script = _script()
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def upgrade(engine: sa.Engine, location: str) -> tuple[str | None, str, bool]:
    """Apply every migration the ledger lacks: (revision before, revision after, whether
    it held ledger tables before). Before is None for an empty or an unversioned one."""
    from alembic import command

    with _exclusive(engine) as conn:
        before, tables = state(conn)
        if before is not None and before not in known():
            raise out_of_date(location, before)
        if before != HEAD:
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        after, _ = state(conn)
    _ready.add(engine)
    return before, after or HEAD, tables


def _config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    return cfg


def _script():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


@contextlib.contextmanager
def _exclusive(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection in a transaction that no other orch migration runs beside."""
    with _thread_lock, _file_lock(engine.url), engine.begin() as conn:
        if engine.dialect.name == "postgresql":  # held until this transaction ends
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})
        yield conn


@contextlib.contextmanager
def _file_lock(url: sa.URL) -> Iterator[None]:
    database = url.database if url.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    path = Path(database).expanduser()
    lock = path.with_name(f".{path.name}.migrate-lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        yield
