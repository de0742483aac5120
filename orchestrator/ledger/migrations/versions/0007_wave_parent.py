"""Follow-ups: ``spend.parent_wave_id``, the wave a leg's wave continues (``orch fanout
--continue``), so the ledger alone tells a follow-up from a first question and links the two
(docs/fanout.md). Null on every other row, and on rows written before this revision.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMN = "parent_wave_id"
INDEX = "ix_spend_parent_wave_id"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if COLUMN not in {c["name"] for c in inspector.get_columns("spend")}:  # idempotent
        op.add_column("spend", sa.Column(COLUMN, sa.String, nullable=True))
    if INDEX not in {i["name"] for i in inspector.get_indexes("spend")}:
        op.create_index(INDEX, "spend", [COLUMN])  # a wave's follow-ups, found by their parent


def downgrade() -> None:
    op.drop_index(INDEX, table_name="spend")
    with op.batch_alter_table("spend") as batch:
        batch.drop_column(COLUMN)
