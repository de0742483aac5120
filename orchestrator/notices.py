"""What orch says to its user besides a command's output: one ``orch:`` line on stderr each.

stdout carries only the output (the answers, a report, a table, ``--json``); everything a run
says about itself — a notice (the local model server started, an answer was truncated, a
wave's totals and where its files are), a warning, a budget that degraded the run — is said
here, once, as one line: ``orch: TEXT`` (``orch: warning: TEXT``). It goes through the log
handler, so it follows the log's rules: ``-q`` (or ``LOG_LEVEL=error``) leaves it out,
``--log-json`` makes it a JSON line, a daemon's job sends it to its client, and registered
key values are masked. ``tests/test_messages.py`` walks the code for any other ``orch:`` line.
"""

from __future__ import annotations

from orchestrator.runtime import NOTICE_LOGGER as LOGGER  # noqa: F401  (the notices' logger)


def one_line(text: object) -> str:
    """``text`` on one line: a notice never spreads over several (a provider's multi-line
    message, a path with a newline)."""
    return " ".join(str(text).split())


def say(text: object, level: str = "notice", *, always: bool = False) -> None:
    """``orch: TEXT`` on stderr; ``level`` ``warning`` or ``error`` says
    ``orch: warning: TEXT``. ``-q`` leaves out all but errors and the notices said
    ``always`` (how a run ended, where its partial results are)."""
    from orchestrator.runtime import notice

    notice(one_line(text), level, always=always)


def warn(line: str) -> None:
    """``orch: warning: LINE`` (not under -q or LOG_LEVEL=error): a plugin skipped, a
    provider's model list shrank."""
    say(line, "warning")
