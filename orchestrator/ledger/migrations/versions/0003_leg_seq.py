"""Exactly once in the database: ``spend.seq`` and a unique key on a leg's durable row.

A leg's row is made at its first billed request and updated in place at each next one
(``seq`` = how many billed requests it holds), so a replay of the outbox, a retried write or
a second host replaying the same journal can only move it forward: ``INSERT ... ON CONFLICT
(wave_id, leg_id) WHERE seq IS NOT NULL DO UPDATE ... WHERE spend.seq < excluded.seq``.

Rows written before this revision keep ``seq`` null and stay outside the key (a partial
index), so a ledger that holds two rows of one leg (a plugin's own, an old double replay)
migrates as it is: no row is rewritten or removed.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

INDEX = "ux_spend_leg"
WHERE = "seq IS NOT NULL"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "seq" not in {c["name"] for c in inspector.get_columns("spend")}:  # idempotent: SQLite
        op.add_column("spend", sa.Column("seq", sa.Integer, nullable=True))  # runs DDL outside
    if INDEX not in {i["name"] for i in inspector.get_indexes("spend")}:  # the transaction
        op.create_index(INDEX, "spend", ["wave_id", "leg_id"], unique=True,
                        sqlite_where=sa.text(WHERE), postgresql_where=sa.text(WHERE))


def downgrade() -> None:
    op.drop_index(INDEX, table_name="spend")
    with op.batch_alter_table("spend") as batch:
        batch.drop_column("seq")
