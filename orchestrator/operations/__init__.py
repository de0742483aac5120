"""Looking after a set-up: orch doctor's checks, past runs read from disk, shell completion."""
