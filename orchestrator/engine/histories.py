"""A wave's saved conversations (``histories.json`` in its folder): for each leg asked after
earlier turns (a follow-up, ``orch fanout --continue``, and its retries), those turns, as
user and assistant texts. The engine writes it as the wave starts; a follow-up of the wave
reads it back (app/continuation.py), so the conversation survives a restart. The one module
that names the file (tests/test_continue.py holds it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

FILE = "histories.json"
ROLES = ("user", "assistant")


def write(wave_dir: Path, by_leg: dict[str, list[dict[str, Any]]]) -> None:
    from orchestrator.store import write_json_atomic

    write_json_atomic(wave_dir / FILE, by_leg)  # scrubbed, as every record is


def read(wave_dir: Path) -> dict[str, list[dict[str, str]]]:
    """The turns each leg of the wave was asked after (empty for a wave asked none); a file
    not as orch writes it is refused, never half read."""
    from orchestrator.store import read_json

    path = wave_dir / FILE
    if not path.exists():
        return {}
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise OrchError(f"cannot read {path} ({exc}); restore it, or start a new fanout") \
            from None
    ok = isinstance(data, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(_turn(m) for m in v)
        for k, v in data.items())
    if not ok:
        raise OrchError(f"{path} is not a conversation as orch writes it (user and assistant "
                        "texts per leg); restore it, or start a new fanout")
    return data


def _turn(message: Any) -> bool:
    return isinstance(message, dict) and set(message) == {"role", "content"} \
        and message["role"] in ROLES and isinstance(message["content"], str)
