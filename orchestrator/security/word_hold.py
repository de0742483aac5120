"""A leg's text streamed out piece by piece, released a whole word at a time.

A provider splits its answer wherever it likes: a key shape (``sk-...``) or a control
sequence may arrive in two chunks, and a scrubber that sees each chunk alone sees neither.
Every face that passes streamed text on as it arrives (the live table's preview of a single
answer, `orch mcp`'s progress notifications) holds each piece here until the whitespace after it
has come, and masks (``secrets.scrub``) and makes inert (``outlet.inert``) what is released:
:func:`WordHold.take` and :func:`WordHold.rest` return text ready to print or send.
"""

from __future__ import annotations

import re

# a word that never ends (a model writing one long token) is still released at this size
HOLD_MAX = 2048
_SPACE = re.compile(r"\s")


class WordHold:
    """What one leg wrote and what of it may go out now. ``raw`` holds nothing back: the
    text as it came, for whoever keeps the answer (not for printing)."""

    def __init__(self, *, inert: bool = True) -> None:
        self.raw = ""
        self._held = ""
        self._inert = inert  # False: the writer's own outlet makes it inert

    def take(self, text: str) -> str:
        """``text`` added; the whole words now complete, masked (and inert), or ''."""
        self.raw += text
        self._held += text
        last = max((m.end() for m in _SPACE.finditer(self._held)), default=0)
        if not last and len(self._held) < HOLD_MAX:
            return ""
        cut = last or len(self._held)
        out, self._held = self._held[:cut], self._held[cut:]
        return self._clean(out)

    def rest(self) -> str:
        """What is still held (the answer ended), masked (and inert)."""
        out, self._held = self._held, ""
        return self._clean(out) if out else ""

    def _clean(self, text: str) -> str:
        from orchestrator.security.outlet import inert
        from orchestrator.security.secrets import scrub

        text = scrub(text)
        return inert(text) if self._inert else text
