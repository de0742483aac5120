"""Token estimates before a request is sent (the provider's count arrives only after).

A flat characters/4 is far off for code, JSON and CSV; this module is where that is
measured and corrected (see bench/ and docs/performance.md)."""

from __future__ import annotations

import json
from typing import Any

CHARS_PER_TOKEN = 4.0


def estimate_text(text: str) -> int:
    if not text:
        return 0
    return int(len(text) / CHARS_PER_TOKEN) + 1


def estimate_messages(messages: list[dict[str, Any]], tools: list[dict] | None = None) -> int:
    """Tokens a request's messages (and tool schemas) will take, with per-message overhead."""
    total = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            total += estimate_text(content)
        elif content is not None:
            total += estimate_text(json.dumps(content))
        if m.get("tool_calls"):
            total += estimate_text(json.dumps(m["tool_calls"]))
        total += 4
    if tools:
        total += estimate_text(json.dumps(tools))
    return total
