"""Keep API keys out of everything orch writes: output, logs, artifacts, the ledger."""

from __future__ import annotations

import os
import re

# Variables named like API_KEY, OPENAI_API_KEY, HF_TOKEN, DB_PASSWORD (not KEYBOARD_LAYOUT).
_SECRET_NAME = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.I)
_KEY_SHAPE = re.compile(r"\b(sk|pk|rk|ak)-[A-Za-z0-9_\-]{8,}\b")


_cache: tuple[dict, tuple[str, ...]] | None = None  # (environment snapshot, its secrets)


def _secrets() -> tuple[str, ...]:
    """Every artifact write scrubs, so scanning the environment each time showed up on the
    leg's hot path; it is rescanned only when the environment changed (a C-level dict
    compare of os.environ's raw data)."""
    global _cache
    raw = getattr(os.environ, "_data", None)
    if raw is not None and _cache is not None and _cache[0] == raw:
        return _cache[1]
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    found = tuple(sorted(values, key=len, reverse=True))
    if raw is not None:
        _cache = (dict(raw), found)
    return found


def secret_values() -> list[str]:
    """Values of environment variables whose names say they hold a secret (longest first)."""
    return list(_secrets())


def scrub(text: str) -> str:
    """Replace every known secret value, and anything shaped like an API key, with ``***``."""
    if not text:
        return text
    for value in _secrets():
        if value in text:
            text = text.replace(value, "***")
    if "k-" not in text:  # every key shape has it; a substring test is far cheaper than a scan
        return text
    return _KEY_SHAPE.sub("***", text)
