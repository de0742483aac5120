"""What was read from the installed code, remembered in ``ORCH_HOME/cache``: the entry points
(``listing``) and the plugins' declared options (``option_cache``). An entry holds the
``installed()`` stamp it was read under and is used only while that stamp is unchanged; any
doubt (a file that cannot be read or written) reads the code again."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def stamp(path: str) -> list[int] | None:
    """A file's or a folder's modification time and size, or None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def installed() -> dict[str, Any]:
    """The Python and each ``sys.path`` folder's stamp: installing, upgrading or removing a
    distribution adds or removes its ``.dist-info`` folder there, which changes the time."""
    return {"python": sys.version, "path": [[p, stamp(p or ".")] for p in sys.path]}


def cache_file(home: Path, name: str) -> Path:
    """``ORCH_HOME/cache/<name>-<sys.path digest>.json``: one entry per interpreter set-up."""
    digest = hashlib.sha256(json.dumps(sys.path).encode()).hexdigest()[:12]
    return home / "cache" / f"{name}-{digest}.json"


def recall(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The entry remembered under ``key`` (as JSON would give it back), or None."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != json.loads(json.dumps(key)):
        return None
    return entry


def remember(path: Path, entry: dict[str, Any]) -> None:
    """Write ``entry`` atomically; with no ORCH_HOME yet nothing is created (a ``--help``
    leaves no trace), and a cache that cannot be written is skipped."""
    from orchestrator.store import write_json_atomic

    if not path.parent.parent.is_dir():
        return
    try:
        write_json_atomic(path, entry, scrubber=None)
    except (OSError, TypeError, ValueError):
        return
