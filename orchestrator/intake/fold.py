"""Folding: text as a reader sees it, so a name spelled to slip past a filter is still found.

A reader recognises "Ｃｌａｕｄｅ" (fullwidth), "Сlaude" (a Cyrillic С), "Cla\u200bude" (a
zero-width space) and "Clau\u0301de" (a combining accent) as Claude. So before the anonymity
rules look at a text it is folded, character by character: Unicode NFKC (fullwidth, ligatures,
mathematical letters, superscripts), then zero-width, soft and formatting characters and
combining marks removed, then every letter Unicode's confusables table (UTS #39, as
``confusable_homoglyphs`` ships it) lists as a look-alike of a Latin letter or digit replaced
by it. Separators between letters ("G.P.T.", "Open AI") are the pattern's to allow
(:mod:`orchestrator.intake.anonymity`), not folded away: the folded text keeps its words.

Each folded character remembers which character of the original it came from, so a match in
the folded text redacts exactly the original characters that spelled it, and everything else
(a review in Russian, a formula) reaches the reader unchanged.
"""

from __future__ import annotations

import functools
import json
import string
import unicodedata
from dataclasses import dataclass

_ASCII_ALNUM = frozenset(string.ascii_letters + string.digits)
# Invisible in print but not removed by NFKC: the categories of format characters (zero-width
# space and joiners, soft hyphen, bidi controls, BOM) and combining marks.
_DROPPED_CATEGORIES = frozenset({"Cf", "Mn", "Me"})
# Look-alike groups the table maps to one prototype: which member a character becomes
# follows its own case (a capital Greek Ι reads as I, a small one as l; a digit as 1).
_I_LIKE = frozenset("Il1|")
_O_LIKE = frozenset("Oo0")


@dataclass(frozen=True)
class Folded:
    """The folded text and, per folded character, the index of the original one."""

    text: str
    origin: tuple[int, ...] | None  # None: the folded text is the original (ASCII)

    def span(self, start: int, end: int, original: str) -> tuple[int, int]:
        """The original characters behind folded ``[start, end)``, with the invisible ones
        that sit inside it (a zero-width space between two letters)."""
        if self.origin is None:
            return start, end
        if start >= end:
            at = self.origin[start] if start < len(self.origin) else len(original)
            return at, at
        return self.origin[start], self.origin[end - 1] + 1


@functools.lru_cache(maxsize=1)
def confusables() -> dict[str, str]:
    """Every non-ASCII character the confusables table says looks like one ASCII letter or
    digit, mapped to it."""
    from importlib import resources

    data = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json")
                      .read_text(encoding="utf-8"))
    table: dict[str, str] = {}
    for char, entries in data.items():
        if len(char) != 1 or char.isascii():
            continue
        targets = [e["c"] for e in entries if len(e.get("c", "")) == 1 and e["c"] in _ASCII_ALNUM]
        if targets:
            table[char] = _by_case(char, targets[0])
    return table


def _by_case(char: str, target: str) -> str:
    if target in _I_LIKE:
        return "1" if char.isdigit() else ("l" if char.islower() else "I")
    if target in _O_LIKE:
        return "0" if char.isdigit() else ("o" if char.islower() else "O")
    return target


@functools.lru_cache(maxsize=4096)
def fold_char(char: str) -> str:
    """What one character reads as: ASCII as it is; dropped ones as ""; else its NFKC form
    with each character folded to a Latin look-alike or stripped of its accents."""
    if char.isascii():
        return char
    if unicodedata.category(char) in _DROPPED_CATEGORIES:
        return ""
    nfkc = unicodedata.normalize("NFKC", char)
    if nfkc.isascii() and nfkc.isalnum():
        return nfkc  # fullwidth, mathematical, superscript letters and digits
    if char in confusables():  # before NFKC's own change: "˛" reads as i, not a space
        return confusables()[char]
    out = []
    for c in nfkc:
        if c.isascii():
            out.append(c)
        elif unicodedata.category(c) in _DROPPED_CATEGORIES:
            continue
        elif c in confusables():
            out.append(confusables()[c])
        else:
            bare = "".join(d for d in unicodedata.normalize("NFKD", c)
                           if unicodedata.category(d) not in _DROPPED_CATEGORIES)
            out.append(bare if bare.isascii() and bare else c)
    return "".join(out)


def fold(text: str) -> Folded:
    """``text`` folded (see the module's docstring), with each character's origin."""
    if text.isascii():
        return Folded(text, None)
    out: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        folded = fold_char(char)
        out.append(folded)
        origin.extend([i] * len(folded))
    return Folded("".join(out), tuple(origin))
