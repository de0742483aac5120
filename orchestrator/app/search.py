"""Finding past runs by their text, as every face does it: ``orch runs search``, `orch mcp`'s
runs tool (``action: search``) and `orch ui`'s search page. A missing SQLite ledger
finds nothing and is not created."""

from __future__ import annotations

from pathlib import Path

from orchestrator import config as config_mod
from orchestrator.ledger.search import DEFAULT_LIMIT, Found
from orchestrator.ledger.search_query import parse

MAX_LIMIT = 1000


def searched(text: str, *, limit: int = DEFAULT_LIMIT, since: str | None = None) -> Found:
    """The newest ``limit`` runs whose prompts or answers hold ``text``. A one-line
    :class:`~orchestrator.errors.UsageProblem` for nothing to find or a bad ``limit``."""
    from orchestrator.app.spend import _missing_sqlite_file
    from orchestrator.errors import UsageProblem
    from orchestrator.ledger.search import search
    from orchestrator.ledger.spend import Ledger

    query = parse(text)  # before any database: a usage error is one line, exit 2
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageProblem(f"limit {limit} is out of range; use 1 to {MAX_LIMIT}")
    after = _after(since)
    if _missing_sqlite_file() is not None:
        return Found(query=query.text, total=0, runs=[], index="none")
    return search(Ledger(), text, limit=limit, since=after)


def reindexed(runs_dir: Path | None = None):
    """Index the runs under ``runs_dir`` (default ORCH_HOME/runs) recorded before the index
    existed; idempotent (:func:`orchestrator.operations.reindex.reindex`)."""
    from orchestrator.ledger.spend import Ledger
    from orchestrator.operations.reindex import reindex

    return reindex(Ledger(), runs_dir or config_mod.runs_dir())


def _after(since: str | None):
    if not since:
        return None
    from orchestrator.app.runs import _moment

    return _moment("--since", since)
