"""``orch ui``: a local, read-only web view of the records orch already writes (waves, councils,
benches, the spend ledger). A face like ``cli``: it reads the core, it never imports another
face, and it can start nothing and spend nothing."""
