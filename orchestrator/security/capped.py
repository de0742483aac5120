"""Capped text: at most N characters of something untrusted kept, the cut marked, the full size
recorded.

What a contestant, a check or a model prints is kept in results files and ledger rows; a
program that prints 300 MB must not make a 300 MB results file. The marker says where the cut
is and how much there was, so a reader never mistakes a kept part for the whole.
"""

from __future__ import annotations

MARK = "[… cut by orch: {size} in all, {kept:,} characters kept]"


def cap(text: str, limit: int, *, tail: bool = False, size: int | None = None) -> str:
    """``text`` if it is whole and fits in ``limit`` characters; else its head (or, with
    ``tail``, its end: where a program's last words are) with the cut marked. ``size``: the
    bytes there were in all, when ``text`` is already a part of them."""
    whole = size is None or size <= len(text.encode("utf-8", "replace"))
    if whole and len(text) <= limit:
        return text
    kept = text[-limit:] if tail else text[:limit]
    mark = MARK.format(size=f"{size:,} bytes" if size is not None else
                       f"{len(text):,} characters", kept=len(kept))
    return f"{mark}\n{kept}" if tail else f"{kept}\n{mark}"
