"""The one outlet: every text orch prints to a terminal or a log line is made inert.

A model's answer, a chair's synthesis, a verdict, a provider's error body, a plugin's log
line: any of them can carry terminal control sequences. OSC 52 writes the clipboard, OSC 0
the window title, ``\\r`` with erase-line rewrites a line already printed ("all tests
passed"), ``ESC[2J`` clears the screen, U+009B is a one-byte CSI, a bidirectional override
reorders what the eye reads. The process's stdout and stderr
(:class:`orchestrator.security.scrubbed_io.ScrubbedStream`, installed for every command and
every daemon job) pass every write through :func:`inert`, on a terminal and piped alike:
each such character is shown escaped (``\\x1b``, ``\\r``, ``\\u009b``, ``\\u202e``), so the
sequence prints as text and does nothing. Newline and tab pass. Files orch writes keep the
exact bytes; ``--json`` is ASCII JSON whose escapes are text already (and a C1 or bidi
character inside a JSON string becomes the same character's JSON escape).

orch's own drawing (rich's live tables and colours) goes around it, on :func:`console`'s raw
channel: every string rich is given is made inert as rich renders it, rich's own escapes
are not. Nothing else may reach the terminal: tests/test_outlet.py walks the code for any
other way (``sys.__stderr__``, a ``Console`` or ``Live`` of its own, ``os.write(2, ...)``).
"""

from __future__ import annotations

import functools
import io
import re
import sys
from typing import Any

# C0 controls but newline and tab, DEL and C1 (U+009B is CSI on its own), the bidirectional
# marks, embeddings, overrides and isolates, the line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2028\u2029\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    # C0 as \x1b; the rest as \u009b: what a JSON string holding the character reads as
    return f"\\x{code:02x}" if code < 0x7F else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every control character but newline and tab, and every bidirectional
    control, shown escaped: printed, it does nothing to the terminal."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def _target(stream: Any) -> Any:
    """The outlet stream under ``stream``: rich's ``FileProxy`` (while a live display
    draws) and the outlet's own wrapper of one are looked through."""
    for _ in range(8):
        proxied = getattr(stream, "rich_proxied_file", None)
        if proxied is None:
            inner = getattr(stream, "inner", None)
            proxied = getattr(inner, "rich_proxied_file", None)
        if proxied is None:
            return stream
        stream = proxied
    return stream


def write_raw(text: str, *, err: bool = False) -> None:
    """Write orch's own drawing (an escape it chose: a line rewritten in place) around
    :func:`inert`; still masked of registered key values. Never model or provider text."""
    target = _target(sys.stderr if err else sys.stdout)
    getattr(target, "raw_write", target.write)(text)


def write_data(text: str) -> None:
    """Write an export's bytes (``orch ledger export``): exact when stdout is a file or a
    program (the user redirected it, as ``> spend.csv``; a CSV's CRLF and a recorded control
    character are data there), inert on a terminal, where they would act. Masked either way."""
    target = _target(sys.stdout)
    if getattr(target, "isatty", lambda: False)():
        target.write(text)
    else:
        getattr(target, "raw_write", target.write)(text)


class _Raw(io.TextIOBase):
    """rich's file: whatever ``sys.stdout``/``sys.stderr`` is at each write (a command's
    outlet, a daemon job's), written raw."""

    def __init__(self, err: bool) -> None:
        self.err = err

    def _stream(self) -> Any:
        return _target(sys.stderr if self.err else sys.stdout)

    def write(self, text: str) -> int:
        write_raw(text, err=self.err)
        return len(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return bool(getattr(self._stream(), "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._stream().fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream(), "encoding", None) or "utf-8"


class _Inert(io.TextIOBase):
    """Made inert, then passed on: what rich's ``FileProxy`` receives while a live display
    redirects stdout and stderr (the proxy prints it on the raw channel, masked there)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(inert(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return bool(self.inner.isatty())

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"


@functools.cache
def _classes() -> tuple[type, type]:
    from rich.console import Console
    from rich.file_proxy import FileProxy
    from rich.live import Live

    class InertConsole(Console):
        """A console whose every string is made inert as it is rendered."""

        def render_str(self, text: str, *args: Any, **kwargs: Any):
            return super().render_str(inert(text), *args, **kwargs)

    class InertLive(Live):
        """A live display: what others print while it draws (rich redirects stdout and
        stderr through itself) still passes the outlet."""

        def start(self, refresh: bool = False) -> None:
            super().start(refresh)
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if isinstance(stream, FileProxy):
                    setattr(sys, name, _Inert(stream))

    return InertConsole, InertLive


def console(*, stderr: bool = False, **kwargs: Any):
    """A rich console on the raw channel, its strings made inert (progress tables, the
    spend table)."""
    return _classes()[0](file=_Raw(stderr), **kwargs)


def live(renderable: Any, *, stderr: bool = True, **kwargs: Any):
    """A rich live display on :func:`console`, the outlet kept while it redirects."""
    return _classes()[1](renderable, console=console(stderr=stderr), **kwargs)
