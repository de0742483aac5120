"""Reading one token count a provider reported, whatever it sent.

Shared by the server's usage normalisation (``server.usage_of``) and the litellm correction
that keeps litellm from discarding a billed answer over its usage (``litellm_patch``): a
count is an int; a whole float (``12.0``) or a string of digits (``"12"``) is read as one;
anything else (``12.5``, ``"abc"``, ``nan``, negative, ``true``) becomes a safe int and a
one-line problem, which marks the answer's usage ``suspect``.
"""

from __future__ import annotations

import math
from typing import Any

# No single request reads or writes more tokens than this, whatever the model.
MAX_TOKEN_COUNT = 10**9


def read_count(value: Any) -> tuple[int, str | None]:
    """``value`` as a count >= 0, and what was wrong with it (None: nothing). A fraction is
    truncated and named; what is no number counts 0."""
    if value is None:
        return 0, None
    if isinstance(value, bool):
        return 0, f"{value!r} is not a count"
    if isinstance(value, int):
        return (0, f"{value:,} is negative") if value < 0 else (value, None)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = int(text) if text.isdigit() else float(text)
        except ValueError:
            return 0, f"{value[:40]!r} is not a count"
        if isinstance(number, int):
            return number, None
        count, problem = read_count(number)
        return count, problem or f"{value[:40]!r} is a number written as text"
    if not isinstance(value, float) or not math.isfinite(value):
        return 0, f"{value!r:.40} is not a count"
    if value < 0:
        return 0, f"{value:g} is negative"
    if not value.is_integer():
        return int(value), f"{value:g} is not a whole count"
    return int(value), None
