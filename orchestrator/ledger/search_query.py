"""What a user types into ``orch runs search``, read as one small query language that means
the same on SQLite's FTS5 and PostgreSQL's tsquery, and is never passed on as syntax.

- words: every one must match (``rate limit``);
- ``"a phrase"``: the words in that order (an unclosed quote runs to the end);
- ``OR`` (upper case) between words or groups: either side (``postgres OR sqlite``);
- ``-word`` / ``-"a phrase"``: must not match;
- ``word*``: any word starting with it.

Anything else is text: ``NEAR(``, ``AND``, ``col:value``, ``^``, a lone ``"`` are words or
nothing, never an operator of the database's own syntax, so no input is a syntax error.
Text with no word to find (``"``, ``-x`` alone) is a one-line usage error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.errors import UsageProblem

MAX_CHARS = 1000
MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what both tokenizers keep
_CHUNK = re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')


@dataclass(frozen=True)
class Term:
    """Words to find next to each other; ``prefix``: the last one may go on."""

    words: tuple[str, ...]
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True)
class Query:
    """Groups joined by OR; within a group every term must match (and no negated one)."""

    text: str
    groups: tuple[tuple[Term, ...], ...]

    @property
    def words(self) -> list[str]:
        """Every word to find (not the excluded ones), in order: the plain search."""
        return [w for group in self.groups for t in group if not t.negated for w in t.words]


def parse(text: str) -> Query:
    """``text`` read as the query language above, or :class:`UsageProblem` in one line."""
    raw = " ".join((text or "").split())
    if len(raw) > MAX_CHARS:
        raise UsageProblem(f"the search is {len(raw):,} characters long; use at most "
                           f"{MAX_CHARS:,} (a few distinctive words find a run)")
    groups: list[list[Term]] = [[]]
    for m in _CHUNK.finditer(raw):
        if m.group(4) is not None:
            chunk = m.group(4)
            if chunk == "OR":
                groups.append([])
                continue
            negated = chunk.startswith("-") and len(chunk) > 1
            prefix = chunk.endswith("*")
            words = tuple(_WORD.findall(chunk))
        else:
            negated, prefix = bool(m.group(1)), bool(m.group(3))
            words = tuple(_WORD.findall(m.group(2)))
        if words:
            groups[-1].append(Term(words, prefix, negated))
    kept = tuple(tuple(g) for g in groups if any(not t.negated for t in g))
    if not kept:
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise UsageProblem(f"nothing to search for in {shown!r}: give a word to find "
                           '(words, "a phrase", OR, -word to exclude, word* for a prefix)')
    if sum(len(t.words) for g in kept for t in g) > MAX_TERMS:
        raise UsageProblem(f"the search has more than {MAX_TERMS} words; a few distinctive "
                           "ones find a run")
    return Query(raw, kept)


# --- SQLite FTS5 --------------------------------------------------------------------------

def _fts_string(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _fts_term(term: Term) -> str:
    phrase = _fts_string(" ".join(term.words))
    return phrase + ("*" if term.prefix else "")


def fts5(query: Query) -> str:
    """The FTS5 MATCH expression: every word a quoted string, the operators orch's own."""
    out = []
    for group in query.groups:
        wanted = " AND ".join(_fts_term(t) for t in group if not t.negated)
        unwanted = [_fts_term(t) for t in group if t.negated]
        expr = f"({wanted})"
        if unwanted:
            expr = f"({expr} NOT ({' OR '.join(unwanted)}))"
        out.append(expr)
    return " OR ".join(out)


def fts5_plain(query: Query) -> str:
    """Every word to find, each quoted, all required: the fallback if FTS5 still objects."""
    return " AND ".join(_fts_string(w) for w in query.words)


# --- PostgreSQL tsquery ----------------------------------------------------------------------

def tsquery(query: Query) -> tuple[str, dict[str, str]]:
    """A SQL expression of type tsquery and its bound parameters: each term through
    ``phraseto_tsquery`` (which never raises on any text), a prefix as ``word:*``."""
    params: dict[str, str] = {}

    def bind(value: str) -> str:
        name = f"q{len(params)}"
        params[name] = value
        return f":{name}"

    def term(t: Term) -> str:
        words = list(t.words)
        if not t.prefix:
            return f"phraseto_tsquery('simple', {bind(' '.join(words))})"
        last = words.pop().lower()
        tail = f"to_tsquery('simple', {bind(_pg_lexeme(last) + ':*')})"
        if not words:
            return tail
        return f"tsquery_phrase(phraseto_tsquery('simple', {bind(' '.join(words))}), {tail})"

    out = []
    for group in query.groups:
        wanted = " && ".join(term(t) for t in group if not t.negated)
        unwanted = [term(t) for t in group if t.negated]
        expr = f"({wanted})"
        if unwanted:
            expr = f"({expr} && !!({' || '.join(unwanted)}))"
        out.append(expr)
    return "(" + " || ".join(out) + ")", params


def tsquery_plain(query: Query) -> tuple[str, dict[str, str]]:
    return "plainto_tsquery('simple', :q0)", {"q0": " ".join(query.words)}


def _pg_lexeme(word: str) -> str:
    """A word quoted as one tsquery lexeme (``\\w`` characters only reach here)."""
    return "'" + word.replace("'", "''").replace("\\", "\\\\") + "'"
