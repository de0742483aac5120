"""Listings handed to an agent are bounded: one unbounded job listing once cost an agent
~19,000 tokens of context. A listing returns at most ``limit`` items (newest first where the
items have an age), the total, and one line saying how many were left out and how to see them.
"""

from __future__ import annotations

from typing import Any

DEFAULT_LIMIT = 20
MAX_LIMIT = 500

LIMIT_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                "description": f"At most this many items (default {DEFAULT_LIMIT}); the "
                               "result says how many there are in all."}


def bounded(doc: dict[str, Any], key: str, limit: int | None, more: str) -> dict[str, Any]:
    """``doc`` with ``doc[key]`` cut to ``limit`` items, ``total`` and, when items were left
    out, ``left_out`` and one ``note`` naming ``more`` (how to see them)."""
    items = list(doc.get(key) or [])
    n = DEFAULT_LIMIT if limit is None else int(limit)
    out = {**doc, key: items[:n], "total": len(items)}
    if len(items) > n:
        out["left_out"] = len(items) - n
        out["note"] = (f"showing {n} of {len(items)} {key}; {len(items) - n} left out: "
                       f"{more}")
    return out
