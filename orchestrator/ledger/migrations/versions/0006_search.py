"""Search: ``search_doc``, one row per leg (the wave's prompt and the leg's answer, as they may
be stored: key values masked, credential content withheld), and its full-text index —
SQLite's FTS5 (``search_fts``, an external-content table kept by triggers), PostgreSQL's
``tsvector`` (a generated column, ``search_doc.tsv``, under a GIN index). ``orch runs search``
reads it (docs/operations.md).

A SQLite built without FTS5 gets the table and no index: search then scans it (slower, said
on stderr). Runs recorded before this revision are indexed from their folders by
``orch runs search --reindex`` (and by ``orch ledger upgrade``); no spend row is touched.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from orchestrator.ledger.search_table import create_fts

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "search_doc"


def _doc_table(meta: sa.MetaData) -> sa.Table:
    """Frozen here on purpose: a migration must not change when the code does."""
    return sa.Table(
        TABLE, meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ts", sa.DateTime, nullable=False, index=True),
        sa.Column("wave_id", sa.String, nullable=False),
        sa.Column("leg_id", sa.String, nullable=False),
        sa.Column("run_id", sa.String),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("status", sa.String),
        sa.Column("tag", sa.String),
        sa.Column("user", sa.String),
        sa.Column("prompt", sa.Text, nullable=False, server_default=""),
        sa.Column("answer", sa.Text, nullable=False, server_default=""),
        sa.Index("ux_search_leg", "wave_id", "leg_id", unique=True),
    )


def upgrade() -> None:
    bind = op.get_bind()
    if not sa.inspect(bind).has_table(TABLE):  # idempotent: SQLite runs DDL outside the
        _doc_table(sa.MetaData()).create(bind)  # transaction
    if bind.dialect.name == "postgresql":
        have = {c["name"] for c in sa.inspect(bind).get_columns(TABLE)}
        if "tsv" not in have:
            op.execute(f"ALTER TABLE {TABLE} ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
                       "(to_tsvector('simple', prompt) || to_tsvector('simple', answer)) STORED")
        op.execute(f"CREATE INDEX IF NOT EXISTS ix_search_tsv ON {TABLE} USING GIN (tsv)")
    elif bind.dialect.name == "sqlite":
        create_fts(bind)  # when this SQLite has FTS5; else search scans the table


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("search_doc_ai", "search_doc_ad", "search_doc_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS search_fts")
    op.drop_table(TABLE)
