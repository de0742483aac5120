"""The account: money per run id, from the ledger (+ open claims), and the request journal.

``account.py`` (one run's account), ``held.py`` (what the record holds before this process
spends), ``claims.py`` (a request's worst case), ``journal.py`` (every request journaled
before the wire, settled by its answer's row). docs/budgets.md, docs/spend.md.
"""

from orchestrator.account.account import Account

__all__ = ["Account"]
