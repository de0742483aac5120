"""A single leg's answer on stdout as it streams (``orch fanout`` with one leg, no chair).

The text goes out a word at a time: a piece is held until the whitespace after it arrives, so
a key shape split across two chunks is masked whole (``secrets.scrub``), and every write
passes the outlet (stdout's ``ScrubbedStream``: registered values masked, control characters
made inert, each on its own: an escape split across chunks stays text).
"""

from __future__ import annotations

import re
import sys

# a word that never ends (a model writing one long token) still reaches the screen
HOLD_MAX = 2048
_SPACE = re.compile(r"\s")


class TextEcho:
    """Writes each streamed piece of one leg's answer to stdout; :attr:`text`: what it got."""

    def __init__(self) -> None:
        self.leg_id: str | None = None
        self.text = ""
        self._held = ""
        self.gone = False  # stdout's reader left

    def __call__(self, leg_id: str, text: str) -> None:
        if self.leg_id is None:
            self.leg_id = leg_id
        if leg_id != self.leg_id:  # one leg's answer is the output; any other is not
            return
        self.text += text
        self._held += text
        last = max((m.end() for m in _SPACE.finditer(self._held)), default=0)
        if not last and len(self._held) < HOLD_MAX:
            return
        cut = last or len(self._held)
        self._write(self._held[:cut])
        self._held = self._held[cut:]

    def close(self) -> None:
        """The held tail out, and the line ended: what follows starts on a line of its own."""
        if self._held:
            self._write(self._held)
            self._held = ""
        if self.text and not self.text.endswith("\n"):
            self._write("\n")

    def _write(self, piece: str) -> None:
        """A reader that went away (``| head -1``) ends the echo, not the run: what the
        command prints at its end meets the closed pipe as before (cli/__init__.py)."""
        from orchestrator.security.secrets import scrub

        if self.gone:
            return
        try:
            sys.stdout.write(scrub(piece))
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
            self.gone = True
