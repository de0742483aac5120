"""Finding past runs by the text of their prompts and answers: ``orch runs search``, the MCP
runs tool's ``search``, and any face that wants it (:func:`search`).

One query (:mod:`orchestrator.ledger.search_query`) over the index (:mod:`orchestrator.ledger.search_table`):
SQLite's FTS5, PostgreSQL's tsvector, or — on a SQLite built without FTS5 — a scan of the
table, said in ``Found.index``. Matching legs are grouped into runs (a council's stages, a
deliberation's rounds and a bench's trials are one run each), newest first, each with its
newest few matching legs and a snippet of where the words are
(:mod:`orchestrator.ledger.search_snippet`; ``highlights``: offsets into it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from orchestrator.errors import OrchError
from orchestrator.ledger import search_query as sq
from orchestrator.ledger.schema import ROUND_INFIX, UTCDateTime
from orchestrator.ledger.search_snippet import Snippets
from orchestrator.ledger.search_table import FTS, NAME, has_fts

DEFAULT_LIMIT = 20
PER_RUN = 3  # legs shown per run: its newest matching ones
QUESTION_CHARS = 200


@dataclass
class Hit:
    """One leg whose prompt or answer matched, with a one-line snippet of it."""

    wave_id: str
    leg_id: str
    kind: str
    model: str
    status: str | None
    field: str  # "answer" or "prompt"
    snippet: str  # one line, the match marks removed
    highlights: list[tuple[int, int]]  # [start, end) offsets of each match in ``snippet``
    ts: datetime
    run_id: str | None = None

    def parts(self) -> list[tuple[str, bool]]:
        """The snippet as (text, matched) pieces, in order: what every face marks (bold on
        a terminal, ``**`` piped, ``<mark>`` in orch ui), none of them with raw markup."""
        parts, at = [], 0
        for start, end in self.highlights:
            parts += [(self.snippet[at:start], False), (self.snippet[start:end], True)]
            at = end
        parts.append((self.snippet[at:], False))
        return [p for p in parts if p[0]]

    def to_dict(self) -> dict[str, Any]:
        return {"wave_id": self.wave_id, "leg_id": self.leg_id, "kind": self.kind,
                "model": self.model, "status": self.status, "field": self.field,
                "snippet": self.snippet, "highlights": [list(h) for h in self.highlights],
                "ts": self.ts.isoformat()}


@dataclass
class RunFound:
    """A run (wave, council, deliberation or bench) some of whose legs matched."""

    id: str
    kind: str
    last_at: datetime  # when its newest matching leg was recorded
    matches: int  # how many of its legs matched
    question: str  # the first line of its prompt
    user: str | None
    tag: str | None
    hits: list[Hit] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "last_at": self.last_at.isoformat(),
                "matches": self.matches, "question": self.question,
                "models": sorted({h.model for h in self.hits}), "user": self.user,
                "tag": self.tag, "hits": [h.to_dict() for h in self.hits]}


@dataclass
class Found:
    query: str
    total: int  # runs that match (``runs`` holds the newest ``limit`` of them)
    runs: list[RunFound]
    index: str  # "fts5", "tsvector", or "scan" (a SQLite without FTS5)
    plain: bool = False  # the query was searched as plain words (the index refused it)

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "total": self.total, "index": self.index,
                "plain": self.plain, "runs": [r.to_dict() for r in self.runs]}


def search(ledger: Any, text: str, *, limit: int = DEFAULT_LIMIT,
           since: datetime | None = None, per_run: int = PER_RUN) -> Found:
    """The runs whose prompts or answers hold ``text`` (:mod:`search_query`'s language),
    newest first, at most ``limit``. A :class:`~orchestrator.errors.UsageProblem` for a
    query with nothing to find; an :class:`OrchError` when the ledger cannot be read."""
    query = sq.parse(text)
    dialect = ledger.engine.dialect.name
    try:
        with ledger.engine.connect() as conn:
            if dialect == "postgresql":
                return _found(conn, query, _Postgres(query), limit, since, per_run)
            if dialect == "sqlite":
                backend = _Fts5(query) if has_fts(conn) else _Scan(query)
                return _found(conn, query, backend, limit, since, per_run)
    except sa_exc.SQLAlchemyError as exc:
        from orchestrator.ledger.connection import brief

        raise OrchError(f"spend ledger {ledger.location}: cannot search: "
                        f"{brief(exc, ledger.url)}") from None
    raise OrchError(f"spend ledger {ledger.location}: search needs SQLite or PostgreSQL")


def _found(conn, query: sq.Query, backend, limit: int, since, per_run: int) -> Found:
    try:
        picked = backend.pick(conn, limit, since, per_run)
    except sa_exc.OperationalError:  # the index objects to the query: search the words
        conn.rollback()
        backend.plain = True
        picked = backend.pick(conn, limit, since, per_run)
    runs: dict[str, RunFound] = {}
    total = 0
    for row in picked:
        total = int(row.total)
        runs.setdefault(row.run, RunFound(id=row.run, kind="wave", last_at=row.last,
                                          matches=int(row.n), question="", user=None,
                                          tag=None))
    ids = [row.id for row in picked]
    snippets = Snippets(query)
    for doc in _details(conn, ids) if ids else []:
        run = runs[doc.run_id or doc.wave_id]
        where, snippet, spans = snippets.best({"answer": doc.answer, "prompt": doc.prompt})
        run.hits.append(Hit(wave_id=doc.wave_id, leg_id=doc.leg_id, kind=doc.kind,
                            model=doc.model, status=doc.status, field=where,
                            snippet=snippet, highlights=spans, ts=doc.ts,
                            run_id=doc.run_id))
        if not run.question:
            run.question = _first_line(doc.prompt[:2000])
        run.user = run.user or doc.user
        run.tag = run.tag or doc.tag
    for run in runs.values():
        run.hits.sort(key=lambda h: (h.ts, h.leg_id), reverse=True)
        run.kind = _kind(run)
    ordered = sorted(runs.values(), key=lambda r: (r.last_at, r.id), reverse=True)
    return Found(query=query.text, total=total, runs=ordered, index=backend.name,
                 plain=backend.plain)


def _kind(run: RunFound) -> str:
    if run.id.startswith("bench-"):
        return "bench"
    if any(ROUND_INFIX in h.wave_id for h in run.hits):
        return "deliberation"
    if any(h.run_id for h in run.hits):
        return "council"
    return "wave"


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= QUESTION_CHARS else line[:QUESTION_CHARS - 1] + "…"
    return ""


# --- the backends ---------------------------------------------------------------------------

# The runs of the matching legs (``docs``), newest first, and each one's newest few legs.
_RUNS = """
runs AS (
  SELECT run, max(ts) AS last, count(*) AS n, count(*) OVER () AS total
  FROM docs GROUP BY run ORDER BY last DESC, run DESC LIMIT :limit
), ranked AS (
  SELECT docs.id, docs.run,
         row_number() OVER (PARTITION BY docs.run ORDER BY docs.ts DESC, docs.id DESC) AS r
  FROM docs JOIN runs ON runs.run = docs.run
)
SELECT ranked.id, ranked.run, runs.last, runs.n, runs.total
FROM ranked JOIN runs ON runs.run = ranked.run WHERE ranked.r <= :per_run
"""
_DOC = f"SELECT d.id, coalesce(d.run_id, d.wave_id) AS run, d.ts FROM {NAME} d"


def _typed(statement: str, **columns) -> sa.TextClause:
    clause = sa.text(statement)
    if ":since" in statement:
        clause = clause.bindparams(sa.bindparam("since", type_=UTCDateTime))
    if ":ids" in statement:
        clause = clause.bindparams(sa.bindparam("ids", expanding=True))
    return clause.columns(**columns)  # by name (column objects would match by position)


def _pick(conn, docs: str, params: dict[str, Any], limit: int, since, per_run: int):
    statement = f"WITH {docs}, {_RUNS}"
    if since is not None:
        params = {**params, "since": since}
    return conn.execute(_typed(statement, last=UTCDateTime),
                        {**params, "limit": limit, "per_run": per_run}).all()


def _since(since: datetime | None) -> str:
    return " AND d.ts >= :since" if since is not None else ""


def _details(conn, ids: list[int]):
    """The legs to show, with the text their snippets come from."""
    statement = (f"SELECT d.id, d.wave_id, d.leg_id, d.run_id, d.kind, d.model, d.status, "
                 f"d.tag, d.user, d.ts, d.prompt, d.answer FROM {NAME} d WHERE d.id IN :ids")
    return conn.execute(_typed(statement, ts=UTCDateTime), {"ids": ids}).all()


class _Fts5:
    name = "fts5"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False

    def pick(self, conn, limit, since, per_run):
        match = sq.fts5_plain(self.query) if self.plain else sq.fts5(self.query)
        docs = (f"hits AS (SELECT rowid AS id FROM {FTS} WHERE {FTS} MATCH :q), "
                f"docs AS ({_DOC} JOIN hits ON hits.id = d.id WHERE 1 = 1{_since(since)})")
        return _pick(conn, docs, {"q": match}, limit, since, per_run)


class _Postgres:
    name = "tsvector"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False

    def pick(self, conn, limit, since, per_run):
        expr, params = sq.tsquery_plain(self.query) if self.plain else sq.tsquery(self.query)
        docs = (f"query AS (SELECT {expr} AS q), "
                f"docs AS ({_DOC}, query WHERE d.tsv @@ query.q{_since(since)})")
        return _pick(conn, docs, params, limit, since, per_run)


class _Scan:
    """A SQLite without FTS5: every leg read, each term looked for as text (ASCII case
    folded, a phrase as its words with one space). Slower (docs/performance.md);
    ``orch runs search`` says so."""

    name = "scan"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False

    def pick(self, conn, limit, since, per_run):
        params: dict[str, str] = {}

        def term(t: sq.Term) -> str:
            name = f"w{len(params)}"
            params[name] = " ".join(t.words).lower()
            held = (f"(instr(lower(d.prompt), :{name}) > 0 "
                    f"OR instr(lower(d.answer), :{name}) > 0)")
            return f"NOT {held}" if t.negated else held

        where = " OR ".join("(" + " AND ".join(term(t) for t in group) + ")"
                            for group in self.query.groups)
        docs = f"docs AS ({_DOC} WHERE ({where}){_since(since)})"
        return _pick(conn, docs, params, limit, since, per_run)
