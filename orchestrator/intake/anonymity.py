"""The anonymity rules: who a participant is, found however it is spelled, and taken out.

A mode that keeps its readers from learning who wrote what (a council's judges, a
deliberation's rounds) gives the identifying terms it computed (``council/anonymity.py``:
ids, display names, families); this module finds them in *folded* text
(:mod:`orchestrator.intake.fold`), so these all name the same family:

- "GPT-4o", "gpt4o", "GPT 4o", "G.P.T.", "g p t" (separators between letters, at most two
  characters each);
- "Qwen2.5", "Claude3", "GPT4o-mini" (digits and version suffixes attached to a name);
- "ChatOpenAI", "OpenAIClient" (a name inside a camel-case identifier);
- "Сlaude" (Cyrillic С), "Ｃｌａｕｄｅ" (fullwidth), "Cla\u200bude" (zero-width), "CIaude"
  (a capital I for an l);

and :meth:`Anonymity.redact` replaces exactly the original characters that spelled the
term. :meth:`Anonymity.leaks` is the same search, so text that went through ``redact`` has no
leak by construction; it is the proof run on every anonymous prompt before it is sent.

Exempt texts (the user's own briefing, which every reader is shown as written) are left
alone wherever they appear whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.intake.fold import fold

REDACTED = "[redacted]"
# Between two letters of a name: whitespace or light punctuation, at most two characters.
_SEP = r"[\s._\-·•*'\"`~+]"
# A version attached to a name: "2.5", "4o", "-3.1-70b", "v2".
_VERSION = rf"(?:{_SEP}?v?\d[a-z0-9]*(?:[._\-]\d[a-z0-9]*)*)?"
# A name starts where a word does, or at a camel-case hump ("ChatOpenAI").
_START = r"(?:(?<![A-Za-z0-9])|(?<=[a-z])(?=[A-Z]))"
_END = r"(?:(?![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]))"


def _letter(c: str) -> str:
    if c in "il":
        return "[il]"  # a capital I for an l reads the same
    return re.escape(c)


def _term_pattern(term: str) -> str:
    """One term, folded and lowered: letters and digits with optional separators between
    them (one for a term of three characters or fewer, where two would join words), "/",
    "@" and ":" as written."""
    folded = fold(term).text.lower()
    pieces = [p for p in re.split(r"([/@:])", folded) if p]
    short = sum(c.isalnum() for c in folded) <= 3
    sep = f"{_SEP}?" if short else f"{_SEP}{{0,2}}"
    out = []
    for piece in pieces:
        if piece in "/@:":
            out.append(re.escape(piece))
            continue
        chars = [c for c in piece if c.isalnum()]
        out.append(sep.join(_letter(c) for c in chars))
    return "".join(out)


@functools.lru_cache(maxsize=256)
def compiled(terms: tuple[str, ...]) -> re.Pattern | None:
    """One pattern for ``terms`` (longest first, so a full name wins over its parts)."""
    ordered = sorted({t for t in terms if t and any(c.isalnum() for c in t)},
                     key=lambda t: (-len(t), t))
    if not ordered:
        return None
    body = "|".join(f"(?:{_term_pattern(t)})" for t in ordered)
    return re.compile(rf"{_START}(?i:(?:{body}){_VERSION}s?){_END}")


def _matches(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    """Original spans of every match, found in the folded text."""
    folded = fold(text)
    return [folded.span(m.start(), m.end(), text) for m in pattern.finditer(folded.text)
            if m.end() > m.start()]


def _outside(spans: list[tuple[int, int]], kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in spans if not any(k0 <= a and b <= k1 for k0, k1 in kept)]


@dataclass(frozen=True)
class Anonymity:
    """The terms that name a participant of an anonymous run, and the texts exempt from them
    (the user's own briefing)."""

    terms: tuple[str, ...]
    exempt: tuple[str, ...] = field(default=())

    @property
    def pattern(self) -> re.Pattern | None:
        return compiled(self.terms)

    def _exempt_spans(self, text: str) -> list[tuple[int, int]]:
        spans = []
        for ex in self.exempt:
            if ex and len(ex) >= 1:
                at = text.find(ex)
                while at >= 0:
                    spans.append((at, at + len(ex)))
                    at = text.find(ex, at + len(ex))
        return spans

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` names a participant, outside its exempt parts."""
        pattern = self.pattern
        if pattern is None or not text:
            return []
        return _outside(_matches(pattern, text), self._exempt_spans(text))

    def redact(self, text: str) -> tuple[str, int]:
        """``text`` with every identifying spelling replaced by ``[redacted]``; how many."""
        spans = self.spans(text or "")
        if not spans:
            return text or "", 0
        out, at = [], 0
        for a, b in spans:
            out += [text[at:a], REDACTED]
            at = b
        out.append(text[at:])
        return "".join(out), len(spans)

    def leaks(self, text: str) -> list[str]:
        """The spellings still in ``text`` that name a participant (empty: anonymous)."""
        return sorted({text[a:b] for a, b in self.spans(text or "")})


def leaked_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The terms (of ``terms``) ``text`` still names, each searched on its own."""
    return sorted({t for t in terms if (p := compiled((t,))) is not None
                   and _matches(p, text or "")})


def redact(text: str, terms: Iterable[str]) -> str:
    return Anonymity(tuple(terms)).redact(text)[0]
