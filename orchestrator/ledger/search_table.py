"""The search index's table, and the one way text goes into it.

One row per leg (``search_doc``): the wave's prompt and the leg's answer, keyed like the leg's
spend row on ``(wave_id, leg_id)``, so writing a leg again (a replay, ``--reindex``) replaces
it: the index is derived data, never counted. Its full-text index is SQLite's FTS5
(``search_fts``, external content kept by triggers) or PostgreSQL's ``tsvector``
(``search_doc.tsv``, generated, under GIN): migration 0006.

The table takes only a :class:`Doc`, and only :func:`admitted` makes one: registered key values
masked, credential content withheld (``[withheld: RULE]``), key shapes cut, each text capped —
whatever built it (a running wave, the outbox's replay, a reindex from the run folders). A
leaf of the ledger's modules: the outbox replays journaled docs through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from orchestrator.ledger.schema import UTCDateTime, storable

REVISION = "0006"  # the migration that made the index (orch ledger upgrade indexes past runs)
NAME = "search_doc"
FTS = "search_fts"
KEY = ("wave_id", "leg_id")
# What one leg puts in the index: the start of the prompt (a question, then maybe context
# files: 2 MB at most) and of the answer. PostgreSQL's tsvector holds at most 1 MB.
PROMPT_CHARS = 20_000
ANSWER_CHARS = 50_000

_meta = sa.MetaData()
TABLE = sa.Table(
    NAME, _meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("ts", UTCDateTime, nullable=False),
    sa.Column("wave_id", sa.String, nullable=False),
    sa.Column("leg_id", sa.String, nullable=False),
    sa.Column("run_id", sa.String),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("status", sa.String),
    sa.Column("tag", sa.String),
    sa.Column("user", sa.String),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("answer", sa.Text, nullable=False),
)

_TOKEN = object()


@dataclass(frozen=True)
class Doc:
    """One leg as the index may hold it; made by :func:`admitted` only."""

    wave_id: str
    leg_id: str
    run_id: str | None
    kind: str
    model: str
    status: str | None
    tag: str | None
    user: str | None
    ts: datetime
    prompt: str
    answer: str
    _by: object = None

    def __post_init__(self) -> None:
        if self._by is not _TOKEN:
            raise TypeError("a search Doc is made by orchestrator.ledger.search_table.admitted")

    def row(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_by"}

    def to_dict(self) -> dict[str, Any]:
        """The journal's form (the outbox): already admitted, ``ts`` as ISO text."""
        return {**self.row(), "ts": self.ts.isoformat()}


def indexable(text: str | None, cap: int) -> str:
    """``text`` as the index may hold it: registered key values masked, credential content
    withheld, key shapes cut (the same rules as what is sent and what is printed), then at
    most ``cap`` characters (a block is found whole before the cut), and nothing a database
    refuses."""
    if not text:
        return ""
    from orchestrator.security.credential_content import withhold
    from orchestrator.security.secrets import scrub, scrub_values

    return storable(scrub(withhold(scrub_values(text)).text)[:cap])


def admitted(*, wave_id: str, leg_id: str, kind: str, model: str, prompt: str | None,
             answer: str | None, run_id: str | None = None, status: str | None = None,
             tag: str | None = None, user: str | None = None,
             ts: datetime | str | None = None, prompt_admitted: str | None = None) -> Doc:
    """The one door into the index. ``prompt_admitted``: the prompt as :func:`indexable`
    already gave it (a wave's legs share one prompt: scanned once)."""
    from orchestrator.ledger.schema import user as who
    from orchestrator.security.secrets import scrub, scrub_values

    def ident(value: str | None) -> str | None:
        return None if value is None else storable(scrub_values(str(value)))[:500]

    return Doc(
        wave_id=ident(wave_id) or "", leg_id=ident(leg_id) or "", run_id=ident(run_id),
        kind=ident(kind) or "leg", model=ident(model) or "", status=ident(status),
        tag=None if tag is None else storable(scrub(str(tag)))[:500],
        user=ident(user) if user is not None else ident(who()),
        ts=_moment(ts),
        prompt=prompt_admitted if prompt_admitted is not None
        else indexable(prompt, PROMPT_CHARS),
        answer=indexable(answer, ANSWER_CHARS), _by=_TOKEN)


def _moment(ts: datetime | str | None) -> datetime:
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts)
        except ValueError:
            ts = None
    if not isinstance(ts, datetime):
        return datetime.now(UTC)
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def from_journal(doc: dict[str, Any]) -> Doc:
    """A journaled doc, admitted again (the registry of this process may know more keys)."""
    return admitted(**{k: doc.get(k) for k in ("wave_id", "leg_id", "kind", "model", "prompt",
                                                "answer", "run_id", "status", "tag", "user",
                                                "ts")})


# --- writing ------------------------------------------------------------------------------

def put(conn: sa.Connection, docs: list[Doc]) -> int:
    """Write ``docs`` (insert, or replace the leg's row: the triggers or the generated
    column keep the full-text index in step) in the caller's transaction; how many."""
    for doc in docs:
        if not isinstance(doc, Doc):
            raise TypeError("the search index takes admitted docs only (search_table.admitted)")
    unique = list({(d.wave_id, d.leg_id): d for d in docs}.values())  # one write per leg
    if not unique:
        return 0
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:  # pragma: no cover - the two backends orch is tested on
        raise TypeError(f"the search index needs SQLite or PostgreSQL, not {dialect}")
    stmt = insert(TABLE)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(KEY),
        set_={c.name: stmt.excluded[c.name] for c in TABLE.columns
              if c.name not in ("id", *KEY)})
    conn.execute(stmt, [d.row() for d in unique])
    return len(unique)


def take_journaled(ledger: Any, docs: list[dict[str, Any]], *,
                   seconds: float = 1.0) -> int:
    """Replay journaled docs (:func:`orchestrator.ledger.outbox.replay_index`) in batches
    until ``seconds`` are spent: how many of them, from the first, the index now holds."""
    deadline = time.monotonic() + seconds
    taken = 0
    while taken < len(docs) and time.monotonic() < deadline:
        batch = docs[taken:taken + 200]
        admitted_batch = []
        for doc in batch:
            try:
                admitted_batch.append(from_journal(doc))
            except (TypeError, ValueError):
                continue  # unreadable: left out of the index, never retried for ever
        with ledger.engine.begin() as conn:
            ledger.bound(conn, deadline)
            put(conn, admitted_batch)
        taken += len(batch)
    return taken


# --- the full-text index on SQLite -----------------------------------------------------------

def fts5_available(conn: sa.Connection) -> bool:
    """Whether this process's SQLite has FTS5 (some builds leave it out)."""
    try:
        conn.exec_driver_sql("CREATE VIRTUAL TABLE temp.orch_fts5_probe USING fts5(a)")
        conn.exec_driver_sql("DROP TABLE temp.orch_fts5_probe")
        return True
    except sa.exc.OperationalError:
        return False


def has_fts(conn: sa.Connection) -> bool:
    return conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (FTS,)).first() \
        is not None


def create_fts(conn: sa.Connection) -> bool:
    """The FTS5 index over ``search_doc`` and the triggers that keep it, filled from the
    table: True when it is there. Made by migration 0006, or later by ``--reindex`` when
    the SQLite that made the ledger had no FTS5 and this one has."""
    if has_fts(conn):
        return True
    if not fts5_available(conn):
        return False
    for statement in (
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(prompt, answer, content='{NAME}', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
        f"CREATE TRIGGER IF NOT EXISTS search_doc_ai AFTER INSERT ON {NAME} BEGIN "
        f"INSERT INTO {FTS}(rowid, prompt, answer) VALUES (new.id, new.prompt, new.answer); END",
        f"CREATE TRIGGER IF NOT EXISTS search_doc_ad AFTER DELETE ON {NAME} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, prompt, answer) "
        "VALUES ('delete', old.id, old.prompt, old.answer); END",
        f"CREATE TRIGGER IF NOT EXISTS search_doc_au AFTER UPDATE ON {NAME} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, prompt, answer) "
        "VALUES ('delete', old.id, old.prompt, old.answer); "
        f"INSERT INTO {FTS}(rowid, prompt, answer) VALUES (new.id, new.prompt, new.answer); END",
        f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
    ):
        conn.exec_driver_sql(statement)
    return True
