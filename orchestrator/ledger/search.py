"""Finding past runs by the text of their prompts and answers: ``orch runs search``, the MCP
runs tool's ``search``, and any face that wants it (:func:`search`).

One query (:mod:`orchestrator.ledger.search_query`) over the index (:mod:`orchestrator.ledger.search_table`):
SQLite's FTS5, PostgreSQL's tsvector, or — on a SQLite built without FTS5 — a scan of the
table, said in ``Found.index``. Matching legs are grouped into runs (a council's stages, a
deliberation's rounds and a bench's trials are one run each), newest first, each with its
best few legs and a snippet of where the words are (``highlights``: offsets into it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from orchestrator.errors import OrchError
from orchestrator.ledger import search_query as sq
from orchestrator.ledger.schema import ROUND_INFIX, UTCDateTime
from orchestrator.ledger.search_table import FTS, MATCH_END, MATCH_START, NAME, has_fts

DEFAULT_LIMIT = 20
PER_RUN = 3  # legs shown per run
SNIPPET_TOKENS = 24  # FTS5's snippet length, in tokens
SNIPPET_CHARS = 240
QUESTION_CHARS = 200
_HEADLINE = (f"StartSel={MATCH_START}, StopSel={MATCH_END}, MaxWords=30, MinWords=12, "
             "ShortWord=0, MaxFragments=1")


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
    for doc in backend.details(conn, ids) if ids else []:
        run = runs[doc.run_id or doc.wave_id]
        in_answer = backend.snippet(doc, "answer")
        chosen, where = (in_answer, "answer") if MATCH_START in in_answer else \
            (backend.snippet(doc, "prompt"), "prompt")
        if MATCH_START not in chosen and in_answer:
            chosen, where = in_answer, "answer"
        snippet, spans = _marked(chosen)
        run.hits.append(Hit(wave_id=doc.wave_id, leg_id=doc.leg_id, kind=doc.kind,
                            model=doc.model, status=doc.status, field=where,
                            snippet=snippet, highlights=spans, ts=doc.ts,
                            run_id=doc.run_id))
        if not run.question:
            run.question = _first_line(doc.head)
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


def _marked(raw: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet on one line, its match marks turned into offsets."""
    text = " ".join((raw or "").split())
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    start: int | None = None
    for part in re.split(f"([{MATCH_START}{MATCH_END}])", text):
        if part == MATCH_START:
            start = at
        elif part == MATCH_END:
            if start is not None and at > start:
                spans.append((start, at))
            start = None
        elif part:
            out.append(part)
            at += len(part)
    snippet = "".join(out)
    if len(snippet) > SNIPPET_CHARS:  # keep the first match in view
        first = spans[0][0] if spans else 0
        begin = max(0, min(first - 40, len(snippet) - SNIPPET_CHARS))
        snippet = snippet[begin:begin + SNIPPET_CHARS]
        spans = [(s - begin, min(e - begin, SNIPPET_CHARS)) for s, e in spans
                 if s >= begin and s - begin < SNIPPET_CHARS]
    return snippet, spans


# --- the backends ---------------------------------------------------------------------------

_RUNS = """
runs AS (
  SELECT run, max(ts) AS last, count(*) AS n, count(*) OVER () AS total
  FROM docs GROUP BY run ORDER BY last DESC, run DESC LIMIT :limit
), ranked AS (
  SELECT docs.id, docs.run,
         row_number() OVER (PARTITION BY docs.run ORDER BY docs.score {order}, docs.ts DESC,
                            docs.id DESC) AS r
  FROM docs JOIN runs ON runs.run = docs.run
)
SELECT ranked.id, ranked.run, runs.last, runs.n, runs.total
FROM ranked JOIN runs ON runs.run = ranked.run WHERE ranked.r <= :per_run
"""
_COLUMNS = ("d.id, d.wave_id, d.leg_id, d.run_id, d.kind, d.model, d.status, d.tag, d.user, "
            "d.ts")


def _typed(statement: str, **columns) -> sa.TextClause:
    clause = sa.text(statement)
    if ":since" in statement:
        clause = clause.bindparams(sa.bindparam("since", type_=UTCDateTime))
    if ":ids" in statement:
        clause = clause.bindparams(sa.bindparam("ids", expanding=True))
    return clause.columns(**columns)  # by name (column objects would match by position)


def _since(since: datetime | None, where: str) -> str:
    return f" {where} d.ts >= :since" if since is not None else ""


class _Fts5:
    name = "fts5"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False

    @property
    def match(self) -> str:
        return sq.fts5_plain(self.query) if self.plain else sq.fts5(self.query)

    def pick(self, conn, limit, since, per_run):
        statement = (
            f"WITH hits AS (SELECT rowid AS id, bm25({FTS}) AS score FROM {FTS} "
            f"WHERE {FTS} MATCH :q), "
            "docs AS (SELECT d.id, coalesce(d.run_id, d.wave_id) AS run, d.ts, hits.score "
            f"FROM hits JOIN {NAME} d ON d.id = hits.id{_since(since, 'WHERE')}), "
            + _RUNS.format(order="ASC"))
        return conn.execute(_typed(statement, last=UTCDateTime),
                            {"q": self.match, "limit": limit, "per_run": per_run,
                             **({"since": since} if since else {})}).all()

    def details(self, conn, ids):
        statement = (
            f"SELECT {_COLUMNS}, substr(d.prompt, 1, 400) AS head, "
            f"snippet({FTS}, 1, :s, :e, '…', {SNIPPET_TOKENS}) AS in_answer, "
            f"snippet({FTS}, 0, :s, :e, '…', {SNIPPET_TOKENS}) AS in_prompt "
            f"FROM {FTS} JOIN {NAME} d ON d.id = {FTS}.rowid "
            f"WHERE {FTS} MATCH :q AND {FTS}.rowid IN :ids")
        return conn.execute(_typed(statement, ts=UTCDateTime),
                            {"q": self.match, "ids": ids, "s": MATCH_START,
                             "e": MATCH_END}).all()

    @staticmethod
    def snippet(doc, where: str) -> str:
        return getattr(doc, f"in_{where}") or ""


class _Postgres:
    name = "tsvector"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False

    def _q(self) -> tuple[str, dict[str, str]]:
        return sq.tsquery_plain(self.query) if self.plain else sq.tsquery(self.query)

    def pick(self, conn, limit, since, per_run):
        expr, params = self._q()
        statement = (
            f"WITH query AS (SELECT {expr} AS q), "
            "docs AS (SELECT d.id, coalesce(d.run_id, d.wave_id) AS run, d.ts, "
            f"ts_rank(d.tsv, query.q) AS score FROM {NAME} d, query "
            f"WHERE d.tsv @@ query.q{_since(since, 'AND')}), " + _RUNS.format(order="DESC"))
        return conn.execute(_typed(statement, last=UTCDateTime),
                            {**params, "limit": limit, "per_run": per_run,
                             **({"since": since} if since else {})}).all()

    def details(self, conn, ids):
        expr, params = self._q()
        statement = (
            f"WITH query AS (SELECT {expr} AS q) "
            f"SELECT {_COLUMNS}, left(d.prompt, 400) AS head, "
            "CASE WHEN to_tsvector('simple', d.answer) @@ query.q "
            "THEN ts_headline('simple', d.answer, query.q, :opts) ELSE '' END AS in_answer, "
            "ts_headline('simple', d.prompt, query.q, :opts) AS in_prompt "
            f"FROM {NAME} d, query WHERE d.id IN :ids")
        return conn.execute(_typed(statement, ts=UTCDateTime),
                            {**params, "ids": ids, "opts": _HEADLINE}).all()

    @staticmethod
    def snippet(doc, where: str) -> str:
        return getattr(doc, f"in_{where}") or ""


class _Scan:
    """A SQLite without FTS5: every doc read, each word looked for as text (ASCII case
    folded). Slower (docs/performance.md); ``orch runs search`` says so."""

    name = "scan"

    def __init__(self, query: sq.Query) -> None:
        self.query = query
        self.plain = False
        self.params: dict[str, str] = {}

    def _term(self, term: sq.Term) -> str:
        name = f"w{len(self.params)}"
        self.params[name] = " ".join(term.words).lower()
        found = f"(instr(lower(d.prompt), :{name}) > 0 OR instr(lower(d.answer), :{name}) > 0)"
        return f"NOT {found}" if term.negated else found

    def _where(self) -> str:
        self.params = {}
        return " OR ".join("(" + " AND ".join(self._term(t) for t in group) + ")"
                           for group in self.query.groups)

    def pick(self, conn, limit, since, per_run):
        statement = (
            "WITH docs AS (SELECT d.id, coalesce(d.run_id, d.wave_id) AS run, d.ts, "
            f"0 AS score FROM {NAME} d WHERE ({self._where()}){_since(since, 'AND')}), "
            + _RUNS.format(order="ASC"))
        return conn.execute(_typed(statement, last=UTCDateTime),
                            {**self.params, "limit": limit, "per_run": per_run,
                             **({"since": since} if since else {})}).all()

    def details(self, conn, ids):
        statement = (f"SELECT {_COLUMNS}, substr(d.prompt, 1, 400) AS head, d.prompt, "
                     f"d.answer FROM {NAME} d WHERE d.id IN :ids")
        return conn.execute(_typed(statement, ts=UTCDateTime), {"ids": ids}).all()

    def snippet(self, doc, where: str) -> str:
        text = getattr(doc, where) or ""
        lowered = text.lower()
        words = sorted({w.lower() for w in self.query.words}, key=len, reverse=True)
        hits = sorted((at, at + len(w)) for w in words
                      for at in (m.start() for m in re.finditer(re.escape(w), lowered)))
        if not hits:
            return text[:SNIPPET_CHARS] if where == "answer" else ""
        begin = max(0, hits[0][0] - 80)
        end = min(len(text), begin + SNIPPET_CHARS)
        out, at = [], begin
        for s, e in hits:
            if s < at or e > end:
                continue
            out += [text[at:s], MATCH_START, text[s:e], MATCH_END]
            at = e
        out.append(text[at:end])
        return ("…" if begin else "") + "".join(out) + ("…" if end < len(text) else "")
