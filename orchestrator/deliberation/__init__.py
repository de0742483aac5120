"""A deliberation: `orch fanout --rounds N` (docs/deliberation.md)."""
