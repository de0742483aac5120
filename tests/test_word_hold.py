"""Streamed text goes out a whole word at a time (security/word_hold.py): a key shape or a
control sequence split across the provider's chunks is masked or made inert whole, wherever
the split falls; and every face that passes a leg's streamed text on goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.security.secrets import scrub
from orchestrator.security.word_hold import HOLD_MAX, WordHold

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-abcdefghijklmnopqrstuvwxyz0123"
TEXT = f"The key is {KEY} and \x1b]52;c;ZXZpbA==\x07 the clipboard.\n"


def released(pieces: list[str], hold: WordHold) -> str:
    return "".join(hold.take(p) for p in pieces) + hold.rest()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(TEXT)), max_size=8))
def test_a_key_or_escape_split_anywhere_is_masked_and_inert_whole(cuts):
    bounds = [0, *sorted(cuts), len(TEXT)]
    pieces = [TEXT[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    hold = WordHold()
    out = released(pieces, hold)
    assert KEY not in out and "sk-abcdefghij" not in out and "\x1b" not in out
    assert "\\x1b]52" in out and out.startswith("The key is ***")
    assert hold.raw == TEXT  # the answer itself is kept as it came


def test_a_naive_piece_by_piece_scrub_would_leak_the_key():
    """Why the hold exists: the same pieces scrubbed one by one let the key through."""
    pieces = ["The key is sk-abcdefghij", "klmnopqrstuvwxyz0123 and more"]
    assert KEY in "".join(scrub(p) for p in pieces)
    assert KEY not in released(pieces, WordHold())


def test_a_word_that_never_ends_is_still_released():
    hold = WordHold()
    assert hold.take("x" * (HOLD_MAX - 1)) == ""
    assert hold.take("xx") == "x" * (HOLD_MAX + 1)


def test_every_face_that_passes_streamed_text_on_holds_it():
    """Every module that reads a leg's streamed text (``LegText``) is one of these: the event
    itself, the CLI's renderer (it hands the text to the live table, which counts it and
    previews the one answer) and `orch mcp`'s progress; the two that show or send it hold it
    in ``WordHold``. A new face that reads it fails here until it is held (or listed)."""
    readers = set()
    for folder in ("orchestrator", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            names = {n.id if isinstance(n, ast.Name) else n.attr
                     for n in ast.walk(ast.parse(path.read_text()))
                     if isinstance(n, ast.Name | ast.Attribute)}
            if "LegText" in names:
                readers.add(str(path.relative_to(ROOT)))
    assert readers == {"orchestrator/events.py", "orchestrator/cli/running.py",
                       "orchestrator/mcp_server/tools.py"}
    for sender in ("orchestrator/progress.py", "orchestrator/mcp_server/tools.py"):
        assert "WordHold(" in (ROOT / sender).read_text(), sender
    renderer = (ROOT / "orchestrator/cli/running.py").read_text()
    assert '(self.progress, "text", lambda *a: None)(event.leg_id, event.text)' in renderer
