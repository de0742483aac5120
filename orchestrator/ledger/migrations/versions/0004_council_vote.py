"""The judges' votes: ``council_vote``, one row per council run × judge × finding shown, so
``orch council stats --judges`` can calibrate judges from the ledger (issue 41).

Runs recorded before this revision have no vote rows; the calibration covers the runs
after it.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "council_vote"


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(TABLE):  # idempotent: SQLite runs DDL outside
        return  # the transaction
    op.create_table(
        TABLE,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ts", sa.DateTime, nullable=False),
        sa.Column("run_id", sa.String, nullable=False),
        sa.Column("judge", sa.String, nullable=False),
        sa.Column("finding", sa.String, nullable=False),
        sa.Column("grp", sa.String, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("shown", sa.Integer, nullable=False),
        sa.Column("vote", sa.String, nullable=False),
        sa.Column("tier", sa.String, nullable=False),
        sa.Column("eligible", sa.Boolean, nullable=False),
        sa.Column("user", sa.String),
        sa.Column("host", sa.String),
    )
    for column in ("ts", "run_id", "judge"):
        op.create_index(f"ix_{TABLE}_{column}", TABLE, [column])


def downgrade() -> None:
    op.drop_table(TABLE)
