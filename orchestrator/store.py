"""Files on disk: atomic JSON writes and append-only JSONL, so a killed process leaves valid files.

Everything passes through :func:`orchestrator.secrets.scrub` on the way: no artifact ever
holds a key value, even one a user pasted into a briefing."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.secrets import scrub


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON next to ``path`` and rename it into place: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(scrub(json.dumps(data, indent=2, default=str)) + "\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def append_jsonl(path: Path, record: Any) -> None:
    """Append one JSON line; each line is complete on its own."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(scrub(json.dumps(record, default=str)) + "\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
