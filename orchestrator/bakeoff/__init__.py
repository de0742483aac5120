"""`orch bench`: a bake-off of contestants on tasks with hidden checks (docs/bench.md)."""
