"""Who and where: every spend and council row records ``user`` and ``host`` (issue 19).

Rows written before this revision keep null there (``orch spend`` shows "(none)").

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = ("user", "host")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table in ("spend", "council"):
        have = {c["name"] for c in inspector.get_columns(table)}
        for name in COLUMNS:  # idempotent: SQLite runs DDL outside the transaction
            if name not in have:
                op.add_column(table, sa.Column(name, sa.String, nullable=True))
    if "ix_spend_user" not in {i["name"] for i in inspector.get_indexes("spend")}:
        op.create_index("ix_spend_user", "spend", ["user"])


def downgrade() -> None:
    op.drop_index("ix_spend_user", table_name="spend")
    for table in ("spend", "council"):
        with op.batch_alter_table(table) as batch:
            for name in COLUMNS:
                batch.drop_column(name)
