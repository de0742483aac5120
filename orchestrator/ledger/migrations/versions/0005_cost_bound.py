"""Unknown is not zero: ``spend.cost_bound_usd``, the most a leg can have cost when the cost of
some of its answers could not be read from their usage (none, or garbage).

Such an answer is counted at the worst case it was sent with (its claim), so a run's account,
read back from the ledger after a kill (a bench resume, a retry), still holds it against the
ceiling (docs/spend.md). Null when every answer's cost was read (``cost_usd`` is then exact),
and on rows written before this revision.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMN = "cost_bound_usd"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if COLUMN not in {c["name"] for c in inspector.get_columns("spend")}:  # idempotent
        op.add_column("spend", sa.Column(COLUMN, sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("spend") as batch:
        batch.drop_column(COLUMN)
