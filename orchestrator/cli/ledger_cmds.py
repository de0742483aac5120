"""``orch ledger``: the spend ledger's schema (``upgrade``) and its rows for a team's own tools
(``export``). Reading and rolling up stay in ``orch spend``."""

from __future__ import annotations

import csv
import json
from datetime import datetime

import click

EXPORT_FORMATS = ("csv", "jsonl")
# A CSV cell starting with one of these is run as a formula by Excel, LibreOffice or Google
# Sheets (OWASP, "CSV Injection"; the full-width forms too, which some of them fold).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


@click.group()
def ledger() -> None:
    """The spend ledger itself: upgrade its schema, export its rows.

    The ledger is ORCH_LEDGER_URL (e.g. postgresql+psycopg://orch@db/orch for a team), else
    ORCH_HOME/ledger.db. docs/ledger.md has the details and the team queries.
    """


@ledger.command()
def upgrade() -> None:
    """Bring the ledger's schema to the revision this orch needs (Alembic migrations).

    Safe to run again and from several machines at once (one migration runs at a time);
    rows are kept. A ledger made before schema versions is adopted in place.

    \b
    Examples:
      orch ledger upgrade
      ORCH_LEDGER_URL=postgresql+psycopg://orch@db/orch orch ledger upgrade
    """
    import sqlalchemy as sa
    from sqlalchemy import exc as sa_exc

    from orchestrator.errors import OrchError
    from orchestrator.ledger import connection as ledger_engine
    from orchestrator.ledger import migrate as ledger_migrate
    from orchestrator.ledger.spend import Ledger

    url = ledger_engine.default_url()
    location = ledger_engine.redact(url)
    try:
        engine = ledger_engine.engine(sa.make_url(url))
        before, after, existed = ledger_migrate.upgrade(engine, location)
    except sa_exc.ArgumentError:
        Ledger(url)  # says what is wrong with the URL, in the ledger's words
        raise
    except ImportError as exc:
        raise OrchError(f"spend ledger {location}: database driver not installed "
                        f"({exc.name or exc}); pip install 'orch[postgres]'") from None
    except (sa_exc.SQLAlchemyError, OSError) as exc:
        raise OrchError(f"cannot upgrade spend ledger {location}: "
                        f"{ledger_engine.brief(exc, url)}") from None
    rows = Ledger(url).rollup()["legs"]  # opening it also replays any outbox rows
    if before == after:
        click.echo(f"spend ledger {location} is at schema revision {after} (the newest); "
                   f"nothing to do ({rows:,} rows)")
    elif not existed:
        click.echo(f"spend ledger {location}: created at schema revision {after}")
    else:
        was = "made before schema versions" if before is None else f"revision {before}"
        click.echo(f"spend ledger {location}: upgraded from {was} to revision {after} "
                   f"({rows:,} rows kept)")


@ledger.command()
@click.option("--since", "since_text", default="30d", show_default=True, metavar="WHEN",
              help="Rows since then: 30m, 24h, 7d, 2w, an ISO date/datetime (UTC), or 'all'.")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="csv",
              show_default=True, help="csv (a header row, then one row per call) or jsonl.")
def export(since_text: str, fmt: str) -> None:
    """Print the ledger's rows, oldest first, for a team's own dashboards and spreadsheets.

    Every column is there, ``user`` and ``host`` included; ``ts`` is ISO 8601 UTC and an
    unknown cost is empty (csv) or null (jsonl), never 0. In csv (RFC 4180, CRLF line
    ends), a text cell starting with = + - @ (or a tab or CR) gets a leading ' so a
    spreadsheet shows it instead of running it; jsonl is exact.

    \b
    Examples:
      orch ledger export --since 30d --format csv > spend.csv
      orch ledger export --since all --format jsonl | jq -s 'group_by(.user)'
    """
    from orchestrator.app.spend import _missing_sqlite_file
    from orchestrator.ledger.spend import TABLE, Ledger, parse_since

    since = None if since_text.strip().lower() == "all" else parse_since(since_text)
    columns = [c.name for c in TABLE.columns]
    from orchestrator.security.outlet import write_data

    class _Out:  # csv's file: every piece through the outlet's data channel
        def write(self, text: str) -> None:
            write_data(text)

    out = _Out()
    rows = iter(()) if _missing_sqlite_file() else Ledger().stream(since)  # never create one
    # RFC 4180 line ends: with a bare LF the csv module leaves a bare CR in a cell unquoted,
    # and every reader then splits the row there
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\r\n") \
        if fmt == "csv" else None
    if writer:
        writer.writeheader()
    for row in rows:
        row["ts"] = _iso(row["ts"])
        if writer:
            writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
        else:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def spreadsheet_safe(value):
    """A text cell a spreadsheet would evaluate (a model id, an error text, a tag) prefixed
    with a single quote, OWASP's rule: shown as text, never run. Numbers and every other
    cell are left as they are; JSON lines stay exact."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat().replace("+00:00", "Z") if ts is not None else None
