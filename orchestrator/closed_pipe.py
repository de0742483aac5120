"""stdout closed early (``orch runs | head -1``): the rest of the output goes nowhere, quietly.

The reader left; that is not an error of the command. The first write that meets the closed
pipe points stdout at /dev/null and the command runs on to its own end and exit code (a
wave still finishes and writes its files). Installed once, by the CLI's ``main``."""

from __future__ import annotations

import io
import os
import sys
from typing import Any


def silence(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null: later writes and the final flush
    succeed and go nowhere."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class QuietPipe(io.TextIOBase):
    """A text stream whose reader may go away: a closed pipe ends the output, not the run."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed_early = False

    def write(self, text: str) -> int:
        if not self.closed_early:
            try:
                self.inner.write(text)
            except BrokenPipeError:
                self._reader_left()
        return len(text)

    def flush(self) -> None:
        try:
            self.inner.flush()
        except BrokenPipeError:
            self._reader_left()

    def _reader_left(self) -> None:
        self.closed_early = True
        silence(self.inner)
        try:  # what the text layer still buffers now goes to /dev/null
            self.inner.flush()
        except (OSError, ValueError):
            pass

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def buffer(self):
        return self.inner.buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)


def install() -> None:
    """sys.stdout as a :class:`QuietPipe` (once per process)."""
    if not isinstance(sys.stdout, QuietPipe) and sys.stdout is not None:
        sys.stdout = QuietPipe(sys.stdout)
