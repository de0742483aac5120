"""The files of a council run, under ``<runs dir>/council-<run_id>/``, each written atomically
(temp file + rename) so a killed run never leaves half a file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.store import write_json_atomic, write_text_atomic


def slug(model: str) -> str:
    """A model name as a file name: ``openai/gpt-4o@hot`` → ``openai-gpt-4o-hot``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-") or "model"


class Artifacts:
    """Knows where each artifact goes; remembers what it wrote (run.json lists it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: list[str] = []

    def _note(self, path: Path) -> None:
        rel = path.relative_to(self.root).as_posix()
        if rel not in self.written:
            self.written.append(rel)

    def text(self, rel: str, text: str) -> Path:
        path = self.root / rel
        write_text_atomic(path, text)  # scrubbed: model output can echo a key back
        self._note(path)
        return path

    def json(self, rel: str, data: Any) -> Path:
        path = self.root / rel
        write_json_atomic(path, data)  # scrubbed on the way
        self._note(path)
        return path

    # -- the named artifacts ---------------------------------------------------------------
    def review(self, n: int, model: str, answer: str, data: dict[str, Any]) -> None:
        base = f"reviews/{n}-{slug(model)}"
        self.text(f"{base}.md", answer or "")
        self.json(f"{base}.json", data)

    def judgement(self, n: int, model: str, prompt: str, answer: str | None,
                  data: dict[str, Any]) -> None:
        base = f"judgements/{n}-{slug(model)}"
        self.text(f"{base}.prompt.md", prompt)
        self.text(f"{base}.md", answer or "")
        self.json(f"{base}.json", data)
