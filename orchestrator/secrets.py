"""Keep API keys out of everything orch writes: output, logs, artifacts, the ledger."""

from __future__ import annotations

import os
import re

# Variables named like API_KEY, OPENAI_API_KEY, HF_TOKEN, DB_PASSWORD (not KEYBOARD_LAYOUT).
_SECRET_NAME = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.I)
_KEY_SHAPE = re.compile(r"\b(sk|pk|rk|ak)-[A-Za-z0-9_\-]{8,}\b")


def secret_values() -> list[str]:
    """Values of environment variables whose names say they hold a secret (longest first)."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def scrub(text: str) -> str:
    """Replace every known secret value, and anything shaped like an API key, with ``***``."""
    if not text:
        return text
    for value in secret_values():
        if value in text:
            text = text.replace(value, "***")
    return _KEY_SHAPE.sub("***", text)
