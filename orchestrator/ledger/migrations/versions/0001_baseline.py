"""The ledger as orch created it before migrations: the spend and council tables.

Adopting: a ledger made by that code (tables, no alembic_version) is brought to this
revision by creating only what it lacks, so its rows stay as they are.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _tables() -> list[sa.Table]:
    """Frozen here on purpose: a migration must not change when the models do."""
    meta = sa.MetaData()
    tokens = [sa.Column(n, sa.BigInteger, nullable=False) for n in
              ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")]
    spend = sa.Table(
        "spend", meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ts", sa.DateTime, nullable=False, index=True),
        sa.Column("wave_id", sa.String, nullable=False, index=True),
        sa.Column("leg_id", sa.String, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("provider", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("finish_reason", sa.String),
        *tokens,
        sa.Column("cost_usd", sa.Float),
        sa.Column("cost_source", sa.String, nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("tag", sa.String),
        sa.Column("project_dir", sa.Text),
        sa.Column("run_id", sa.String, index=True),
    )
    findings = [sa.Column(n, sa.Integer, nullable=False) for n in
                ("findings_blocker", "findings_major", "findings_minor", "findings_nit",
                 "confirmed")]
    council = sa.Table(
        "council", meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ts", sa.DateTime, nullable=False, index=True),
        sa.Column("run_id", sa.String, nullable=False, index=True),
        sa.Column("model", sa.String, nullable=False, index=True),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("reviewed", sa.Boolean, nullable=False),
        sa.Column("conformed", sa.Boolean),
        sa.Column("cut", sa.Boolean, nullable=False),
        *findings,
        sa.Column("street_cred", sa.Float),
        sa.Column("verdict", sa.String),
    )
    return [spend, council]


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    for table in _tables():
        if not inspector.has_table(table.name):
            table.create(bind)  # with its indexes
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:  # an older ledger may lack a later column: add it
            if column.name not in have:
                op.add_column(table.name, sa.Column(column.name, column.type, nullable=True))
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(bind)


def downgrade() -> None:
    op.drop_table("council")
    op.drop_table("spend")
