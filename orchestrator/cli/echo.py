"""A single leg's answer on stdout as it streams (``orch fanout`` with one leg, no chair).

The text goes out a word at a time (``security/word_hold.py``: a piece is held until the
whitespace after it arrives, so a key shape split across two chunks is masked whole), and
every write passes the outlet (stdout's ``ScrubbedStream``: registered values masked, control
characters made inert, each on its own: an escape split across chunks stays text).
"""

from __future__ import annotations

import sys

from orchestrator.security.word_hold import WordHold


class TextEcho:
    """Writes each streamed piece of one leg's answer to stdout; :attr:`text`: what it got."""

    def __init__(self) -> None:
        self.leg_id: str | None = None
        self._hold = WordHold(inert=False)  # stdout's outlet makes every write inert
        self.gone = False  # stdout's reader left

    @property
    def text(self) -> str:
        return self._hold.raw

    def __call__(self, leg_id: str, text: str) -> None:
        if self.leg_id is None:
            self.leg_id = leg_id
        if leg_id != self.leg_id:  # one leg's answer is the output; any other is not
            return
        piece = self._hold.take(text)
        if piece:
            self._write(piece)

    def close(self) -> None:
        """The held tail out, and the line ended: what follows starts on a line of its own."""
        rest = self._hold.rest()
        if rest:
            self._write(rest)
        if self.text and not self.text.endswith("\n"):
            self._write("\n")

    def _write(self, piece: str) -> None:
        """A reader that went away (``| head -1``) ends the echo, not the run: what the
        command prints at its end meets the closed pipe as before (cli/__init__.py)."""
        if self.gone:
            return
        try:
            sys.stdout.write(piece)
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
            self.gone = True
