"""orch mcp's listings are bounded: `runs` with 100 runs returns the newest 20, the total and
one line saying how many were left out and how to see them; `spend` groups likewise."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import anyio

from orchestrator.mcp_server.tools import JOBS


class Job:
    watches = False

    def progress(self, value, total, message) -> None:
        pass


def call(tool: str, args: dict) -> dict:
    return anyio.run(JOBS[tool], args, Job())


def make_runs(runs_dir, n: int) -> list[str]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ids = []
    for i in range(n):
        run_id = f"r{i:03d}"
        where = runs_dir / f"council-{run_id}"
        where.mkdir(parents=True)
        (where / "run.json").write_text(json.dumps({
            "run_id": run_id, "kind": "council", "status": "complete", "exit_code": 0,
            "created_at": (t0 + timedelta(minutes=i)).isoformat(), "seats": []}))
        ids.append(run_id)
    return ids


def test_runs_returns_the_newest_20_the_total_and_what_was_left_out(orch_home):
    ids = make_runs(orch_home / "runs", 100)
    doc = call("runs", {})
    assert [r["id"] for r in doc["runs"]] == ids[::-1][:20]  # newest first
    assert doc["total"] == 100 and doc["left_out"] == 80
    assert doc["note"] == ("showing 20 of 100 runs; 80 left out: raise limit, pass since or "
                           "status, or run `orch runs`")
    doc = call("runs", {"limit": 5})
    assert len(doc["runs"]) == 5 and doc["left_out"] == 95


def test_a_short_listing_says_its_total_and_nothing_else(orch_home):
    make_runs(orch_home / "runs", 3)
    doc = call("runs", {})
    assert len(doc["runs"]) == 3 and doc["total"] == 3
    assert "left_out" not in doc and "note" not in doc


def test_the_schemas_declare_the_limit():
    from orchestrator.mcp_server.schemas import TOOLS

    for name in ("runs", "spend"):
        limit = TOOLS[name]["inputSchema"]["properties"]["limit"]
        assert limit["default"] == 20 and limit["minimum"] == 1
