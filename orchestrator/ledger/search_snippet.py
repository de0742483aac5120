"""Where a search's words are in a leg's text: one line of at most ``SNIPPET_CHARS`` around the
first of them, and the offsets of each (``highlights``). Pure Python over the few legs a
search shows: the database's own snippet functions cost 10-20 ms a leg on a common word
(docs/performance.md), this a regular expression's pass.

A word is highlighted where it stands as a word, in any case; a ``word*`` term's word where a
word starts with it. The index decided which legs match (phrases, exclusions); this only
shows where. Accents are looked through when the plain pass finds nothing (FTS5 removes
diacritics).
"""

from __future__ import annotations

import re
import unicodedata

from orchestrator.ledger.search_query import Query

SNIPPET_CHARS = 240
BEFORE = 60  # characters shown before the first match
_TOKEN = re.compile(r"[^\W_]+")


class Snippets:
    """The snippet maker of one query."""

    def __init__(self, query: Query) -> None:
        terms = [t for group in query.groups for t in group if not t.negated]
        self.words = {w.casefold() for t in terms for w in t.words}
        self.prefixes = {t.words[-1].casefold() for t in terms if t.prefix}
        alternatives = sorted((re.escape(w) for w in self.words - self.prefixes),
                              key=len, reverse=True)
        alternatives += [re.escape(p) + r"[^\W_]*" for p in self.prefixes]
        self.pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + r")(?![^\W_])",
                                  re.IGNORECASE)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the query's words are in ``text``."""
        found = [m.span() for m in self.pattern.finditer(text)]
        if found or text.isascii():
            return found
        return [m.span() for m in _TOKEN.finditer(text) if self._folded_match(m.group())]

    def _folded_match(self, token: str) -> bool:
        folded = _fold(token)
        return folded in self.words or any(folded.startswith(_fold(p)) for p in self.prefixes)

    def best(self, fields: dict[str, str]) -> tuple[str, str, list[tuple[int, int]]]:
        """(field, snippet, highlights): the first field (in order) that shows a word, else
        the first field's start."""
        for name, text in fields.items():
            spans = self.spans(text or "")
            if spans:
                return (name, *window(text, spans))
        name, text = next(((n, t) for n, t in fields.items() if t),
                          next(iter(fields.items())))
        return (name, *window(text or "", []))


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word.casefold())
                   if not unicodedata.combining(c))


def window(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` around its first span on one line (whitespace runs as one space, ``…`` where
    it was cut), and the spans that fall inside, as offsets into it."""
    first = spans[0][0] if spans else 0
    begin = max(0, first - BEFORE)
    if begin:  # start at a word
        space = text.find(" ", begin, first)
        begin = space + 1 if space >= 0 else begin
    while begin < (first if spans else len(text)) and text[begin].isspace():
        begin += 1
    end = min(len(text), begin + SNIPPET_CHARS)
    out: list[str] = ["…"] if begin else []
    at: dict[int, int] = {}
    for i in range(begin, end):
        ch = text[i]
        if ch.isspace():
            if out and out[-1] == " ":
                at[i] = len(out) - 1
                continue
            ch = " "
        at[i] = len(out)
        out.append(ch)
    if end < len(text):
        out.append("…")
    shown = [(at[s], at[e - 1] + 1) for s, e in spans if s >= begin and e <= end]
    return "".join(out).rstrip(), shown
