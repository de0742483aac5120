"""The ledger: every billed call and council row in one durable record, with its schema, database, migrations and outbox."""
