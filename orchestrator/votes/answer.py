"""An answer's identity: two answers are the same when their normalised texts are equal.

Normalised: Unicode NFKC, case folded, every run of whitespace one space, markdown emphasis
and code marks around a whole word or phrase dropped (``**17**``, ```x```, ``*yes*``; never
inside a word or a formula: ``2**3`` stays), and the wrapping a model adds around a short
answer taken off its ends (those marks, quotes, a final ``.`` or ``!``). So ``**17**``,
``17.`` and `` 17 `` are one answer, as are ``The answer is **17**.`` and ``the answer is
17``; ``17`` and ``18``, or ``a c b`` and ``a b c``, are not. The digest names it in
documents, votes and the UI.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WRAP = "*_`\"'“”‘’ "
_END = ".!。"
# a mark pair around a phrase that starts and ends at a word's edge: **17**, `x`, *yes*
_EMPHASIS = re.compile(r"(?<!\S)(\*\*|__|\*|`)(\S(?:.*?\S)?)\1(?!\S)")


def normalised(text: str | None) -> str:
    """The text two answers are compared by (see the module docstring)."""
    words = " ".join(unicodedata.normalize("NFKC", text or "").casefold().split())
    previous = None
    while previous != words:  # "**17.**", "17.**": peel in any order
        previous = words
        words = _EMPHASIS.sub(r"\2", words).strip(_WRAP).rstrip(_END).strip()
    return words


def digest(text: str | None) -> str:
    """An answer's identity: 12 hex digits of the sha256 of its normalised text."""
    return hashlib.sha256(normalised(text).encode()).hexdigest()[:12]
