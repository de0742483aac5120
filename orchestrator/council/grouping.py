"""Which findings are one issue: same file, line ranges within a few lines of each other, and
claims that say the same thing.

Two seats that raise one bug should be tiered once, but two different bugs on one line must
stay two: "missing timeout on socket read" and "socket read should log errors" share a place,
not a claim. Claim similarity is the Dice coefficient of the claims' content-word stems; its
threshold is fixed on the labelled pairs in ``tests/council_claim_pairs.py`` (precision at
least 0.9 there, measured by ``tests/test_council_grouping.py``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

CLAIM_SIMILARITY = 0.55  # Dice over content-word stems; above it (>=) claims are one issue
LINE_SLACK = 3  # line ranges this close still overlap

_STOPWORDS = frozenset(
    "a an the and or for with that this from are was were not but has have had its into when "
    "then than can may might should would could will does did any all out too very more most "
    "over under there their them they which what who how why where been being also only is "
    "be it of on in to at by as if so no nor our we you your there here such some each every "
    "one via per about just still even up down off".split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")
_WORD = re.compile(r"[a-z0-9_]+")
# "path.py:42", "path.py:40-45", "path.py:L42-L45", "path.py line 42", "path.py, lines 3 to 9"
_LINES = re.compile(r"(?::|#|\blines?\s+|,\s*lines?\s+)L?(\d+)(?:\s*(?:-|–|to|\.\.)\s*L?(\d+))?",
                    re.I)


def natural_key(finding_id: str) -> tuple:
    """F2 before F10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", finding_id))


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=4096)
def claim_stems(claim: str) -> frozenset[str]:
    words = _WORD.findall((claim or "").lower())
    return frozenset(stem(w) for w in words if w not in _STOPWORDS and len(w) >= 2)


def claim_similarity(a: str, b: str) -> float:
    """Dice coefficient of the two claims' content-word stems, 0..1."""
    sa, sb = claim_stems(a), claim_stems(b)
    if not sa or not sb:
        return 0.0
    return 2 * len(sa & sb) / (len(sa) + len(sb))


@functools.lru_cache(maxsize=4096)
def parse_location(text: str) -> tuple[str, tuple[int, int] | None]:
    """(file, line range or None) from a location as seats write it. Case, spaces and a
    leading ``./`` are ignored; a location without a file-like first word is kept whole."""
    text = " ".join((text or "").split())
    m = _LINES.search(text)
    where = (text[: m.start()] if m else text).strip(" ,(:#").lower().removeprefix("./")
    where = where.split(" (")[0].split(" ")[0] if "." in where.split(" ")[0] else where
    if not m:
        return where, None
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else start
    return where, (min(start, end), max(start, end))


def same_place(a: str, b: str) -> bool:
    """Same file, and line ranges that overlap within LINE_SLACK lines (when both have one)."""
    fa, ra = parse_location(a)
    fb, rb = parse_location(b)
    if not fa or fa != fb:
        return False
    if ra is None or rb is None:
        return True
    return ra[0] - LINE_SLACK <= rb[1] and rb[0] - LINE_SLACK <= ra[1]


def similar(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two seats describing one issue: the same place and a similar claim."""
    return (same_place(a.get("location", ""), b.get("location", ""))
            and claim_similarity(a.get("claim", ""), b.get("claim", "")) >= CLAIM_SIMILARITY)


def group_findings(findings: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Greedy in id order: a finding joins the first group that holds nothing from its own
    seat and whose every member it resembles, else starts a group."""
    groups: list[list[dict[str, Any]]] = []
    for f in sorted(findings, key=lambda f: natural_key(f["id"])):
        for group in groups:
            if all(m["seat"] != f["seat"] and similar(m, f) for m in group):
                group.append(f)
                break
        else:
            groups.append([f])
    return groups
