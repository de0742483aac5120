"""The spend ledger's rows as a test reads them: straight from the SQLite file in ORCH_HOME,
not through orch's own reader (what a test checks does not pass through the code it tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def ledger_rows(home: Path, where: str = "", *args: object) -> list[dict]:
    """The spend rows (those ``where`` holds for, with ``args``), in the order written; none
    when no ledger was made (reading it does not make the file) or while another process is
    still making its table."""
    db = home / "ledger.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(
            f"select * from spend {f'where {where}' if where else ''} order by id", args)]
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):  # the table is being made
            return []
        raise  # a ``where`` that is no SQL: a test reading [] from it could never fail
    finally:
        con.close()
