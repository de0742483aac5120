"""Composing a briefing: the prompt plus context files, read once and shared by every leg."""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.errors import OrchError

MAX_CONTEXT_BYTES = 2_000_000


def read_prompt(prompt: str | None, prompt_file: str | None) -> str:
    """``--prompt``, ``--prompt-file`` (``-`` = stdin), or piped stdin, in that order."""
    if prompt and prompt_file:
        import click

        raise click.UsageError("pass either --prompt or --prompt-file, not both")
    if prompt is not None:
        text = prompt
    elif prompt_file == "-" or (prompt_file is None and not sys.stdin.isatty()):
        # bytes, decoded leniently: a stray non-UTF-8 byte is not worth a failed run
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    elif prompt_file is not None:
        path = Path(prompt_file)
        if not path.is_file():
            raise OrchError(f"prompt file {prompt_file} does not exist; check the path")
        text = path.read_text(encoding="utf-8", errors="replace")
    else:
        text = ""
    if not text.strip():
        raise OrchError("the briefing is empty; pass --prompt TEXT, --prompt-file FILE, "
                        "or pipe it on stdin")
    return text


def read_context(paths: tuple[str, ...] | list[str]) -> str:
    """Each file as a fenced section, in the order given."""
    sections, total = [], 0
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise OrchError(f"--context {raw} is a directory; pass files (e.g. --context "
                            f"{raw}/main.py) or use the workspace tools")
        if not path.is_file():
            raise OrchError(f"--context {raw} does not exist; check the path")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise OrchError(f"--context {raw} is a binary file; pass text files only")
        total += len(data)
        if total > MAX_CONTEXT_BYTES:
            raise OrchError(f"context files add up to more than {MAX_CONTEXT_BYTES:,} bytes; "
                            "pass fewer or smaller files")
        text = data.decode("utf-8", errors="replace")
        sections.append(f"### File: {raw}\n\n```\n{text.rstrip()}\n```")
    return "\n\n".join(sections)


def compose(prompt: str, context: str = "") -> str:
    if not context:
        return prompt.strip() + "\n"
    return f"{prompt.strip()}\n\n## Context\n\n{context}\n"
