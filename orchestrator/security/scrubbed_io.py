"""stdout and stderr as orch writes them: registered key values masked, control sequences
made inert, on the way out.

The last net under everything a command prints (answers, the human summary, ``--json``,
progress, log lines): whatever produced the text, a registered value (or one of its
encodings) never reaches the terminal or a CI log, and no escape sequence in it acts on the
terminal (:mod:`orchestrator.security.outlet`). Key *shapes* are masked earlier, by the code
that knows which text is free text (secrets.py)."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.security.outlet import inert
from orchestrator.security.secrets import scrub_values


class ScrubbedStream(io.TextIOBase):
    """A text stream that masks registered values in each write and makes it inert, then
    passes it on: the outlet.

    It has no ``buffer``: click (and anyone else) must write text through it, never bytes
    around it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.inner.write(inert(scrub_values(text)))
        return len(text)

    def raw_write(self, text: str) -> int:
        """orch's own drawing (rich's escapes, :func:`outlet.write_raw`): masked, not made
        inert."""
        self.inner.write(scrub_values(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)


@contextmanager
def scrubbed_output() -> Iterator[None]:
    """sys.stdout and sys.stderr scrubbed while a command runs (nested calls are no-ops)."""
    if isinstance(sys.stdout, ScrubbedStream) and isinstance(sys.stderr, ScrubbedStream):
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ScrubbedStream(out), ScrubbedStream(err)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        sys.stdout, sys.stderr = out, err
