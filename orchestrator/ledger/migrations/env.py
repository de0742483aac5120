"""Alembic's entry point for the ledger's migrations. orch runs it programmatically
(orchestrator/ledger/migrate.py) on a connection it already holds, inside its lock; there is
no alembic.ini. The target metadata is there for maintainers comparing models with a database."""

from alembic import context

from orchestrator.ledger.council_rows import CouncilRow  # noqa: F401 - registers the council table
from orchestrator.ledger.schema import SpendRow
from orchestrator.ledger.vote_table import VoteRow  # noqa: F401 - registers the judges' votes

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SpendRow.metadata,
                  render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
