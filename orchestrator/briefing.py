"""Composing a briefing: the prompt plus context files, read once and shared by every leg."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

from orchestrator.errors import OrchError, UsageProblem

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
        regular_file(prompt_file, "--prompt-file")
        path = Path(prompt_file)
        if not path.is_file():
            raise UsageProblem(f"prompt file {prompt_file} does not exist; check the path")
        text = path.read_text(encoding="utf-8", errors="replace")
    else:
        text = ""
    if not text.strip():
        raise UsageProblem("the briefing is empty; pass --prompt TEXT, --prompt-file FILE, "
                        "or pipe it on stdin")
    return text


def positional_prompt(words: tuple[str, ...] | list[str], prompt: str | None,
                      prompt_file: str | None) -> str | None:
    """The prompt given as the command's one argument (``orch fanout -m a,b "question"``),
    the same as ``--prompt``; given twice, or as several unquoted words, a usage mistake."""
    if not words:
        return prompt
    if len(words) > 1:
        raise UsageProblem(f"the prompt is {len(words)} arguments ({' '.join(words)[:60]!r}); "
                           "quote it as one: orch fanout -m MODELS \"your question\"")
    if prompt is not None or prompt_file is not None:
        given = "--prompt" if prompt is not None else "--prompt-file"
        raise UsageProblem(f"the prompt is given twice (as an argument and with {given}); "
                           "pass it one way")
    return words[0]


def prompt_source_name(prompt: str | None, prompt_file: str | None) -> str:
    """How a refusal names where the prompt came from."""
    if prompt is not None:
        return "--prompt"
    if prompt_file and prompt_file != "-":
        return prompt_file
    return "stdin"


def read_context(paths: tuple[str, ...] | list[str]) -> str:
    """Each file as a fenced section, in the order given, its credential content (a
    private key, a token in a URL, ...) withheld with the rule named, and said on stderr."""
    from orchestrator.intake.admit import admit_text
    from orchestrator.security.secrets import find_position

    sections, total = [], 0
    for raw in paths:
        path = Path(raw)
        regular_file(raw, "--context")
        if path.is_dir():
            raise UsageProblem(f"--context {raw} is a directory; pass files (e.g. --context "
                            f"{raw}/main.py) or use the workspace tools")
        if not path.is_file():
            raise UsageProblem(f"--context {raw} does not exist; check the path")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise UsageProblem(f"--context {raw} is a binary file; pass text files only")
        total += len(data)
        if total > MAX_CONTEXT_BYTES:
            raise UsageProblem(f"context files add up to more than {MAX_CONTEXT_BYTES:,} bytes; "
                            "pass fewer or smaller files")
        text = data.decode("utf-8", errors="replace")
        # a key orch itself sends is refused by check_briefing, naming the file and line;
        # withholding it here would hide that the user is about to send their own key
        # (the intake's one function: the wire would withhold it anyway; here it is said)
        if find_position(text) is None:
            got = admit_text(text)
            text = got.text
            if got.withheld:
                from orchestrator.notices import say

                say(f"--context {raw}: credential content withheld (rules: "
                    f"{', '.join(got.withheld)}); the models see [withheld: RULE] instead")
        sections.append(f"### File: {raw}\n\n```\n{text.rstrip()}\n```")
    return "\n\n".join(sections)


def regular_file(path: str, option: str) -> None:
    """A usage error for a device, FIFO or socket (reading /dev/zero never ends); a missing
    file or a directory is left to the caller's own words."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        import click

        raise click.UsageError(f"{option} {path} is not a regular file (a device, pipe or "
                               "socket); pass a text file, or pipe the text on stdin")


def compose(prompt: str, context: str = "") -> str:
    if not context:
        return prompt.strip() + "\n"
    return f"{prompt.strip()}\n\n## Context\n\n{context}\n"


_SECTION = re.compile(r"^### (?:File: (.+)|Diff: (git diff .+))\n\n```[a-z]*\n", re.M)


def check_briefing(briefing: str, prompt_source: str = "the prompt") -> None:
    """Refuse, before any spend, a briefing that holds a registered key value: one line
    naming the file and line, never the value."""
    from orchestrator.security.secrets import find_position

    found = find_position(briefing)
    if found is None:
        return
    at, source = found
    where, start = prompt_source, 0
    context_at = briefing.find("\n\n## Context\n\n")
    if 0 <= context_at < at:
        for match in _SECTION.finditer(briefing, context_at):
            if match.start() > at:
                break
            where, start = match.group(1) or match.group(2), match.end()
    line = briefing.count("\n", start, at) + 1
    raise OrchError(f"the briefing holds the value of {source}, a key orch sends: {where} "
                    f"line {line}; remove it and run again (nothing was sent)")
