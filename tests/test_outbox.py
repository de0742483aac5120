"""Never lose a billed row: a ledger that cannot take rows within the wave's bound (30 s in
total, not per row) sends them to a fsync'd outbox that the next command replays, once."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.engine import ledger_sink
from orchestrator.ledger import outbox
from orchestrator.ledger.spend import Ledger, default_url
from orchestrator.testing.scripted_server import Reply


def outbox_lines(url: str) -> list[dict]:
    return [json.loads(x) for path in outbox.locations(url) if path.exists()
            for x in path.read_text().splitlines()]


def ledger_count(home) -> int:
    return sqlite3.connect(home / "ledger.db").execute("select count(*) from spend").fetchone()[0]


def test_a_locked_ledger_costs_the_wave_one_bound_in_total_and_loses_no_row(
        orch, scripted_server, orch_home, monkeypatch):
    """The issue's case: another process holds a write transaction for 200 s. Before, the
    wave exited 0 with 1 of its 2 rows and N legs could stall (N+1) x 150 s."""
    from orchestrator.runtime import litellm

    litellm()  # imported before the clock starts, as orch fanout does
    monkeypatch.setattr(ledger_sink, "BUDGET_S", 1.0)
    orch.provider()
    Ledger().close()  # the table exists; now someone else takes the write lock
    holder = sqlite3.connect(orch_home / "ledger.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    for n in range(4):  # legs that end at different times: four separate ledger writes
        scripted_server.script(f"m{n}", Reply(text="ok", latency=0.3 * n))
    try:
        run = orch.run_wave([f"m{n}" for n in range(4)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    doc = run.doc
    assert doc["status"] == "complete" and doc["exit_code"] == 0 and doc["ledger_errors"] == []
    assert all("ledger_outbox" in leg for leg in doc["legs"])
    waited = max(leg["duration_s"] for leg in doc["legs"])
    assert waited < 1.0 + 0.9 + 3  # one bound for the whole wave, not one per row
    lines = outbox_lines(default_url())  # each leg: its row in flight, then its end
    assert {x["row"]["leg_id"] for x in lines} == {leg["leg_id"] for leg in doc["legs"]}
    assert {x["row"]["leg_id"] for x in lines if x["row"]["status"] == "complete"} == {
        leg["leg_id"] for leg in doc["legs"]}
    assert ledger_count(orch_home) == 0
    result = CliRunner().invoke(cli, ["spend"])
    assert "replayed 4 rows from the ledger outbox" in result.output
    assert ledger_count(orch_home) == 4 and outbox_lines(default_url()) == []


def test_replay_is_exactly_once_even_after_a_crash_between_insert_and_rewrite(orch_home):
    ledger = Ledger(replay=False)
    row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
           "status": "complete", "input_tokens": 10, "cost_usd": 0.5, "cost_source": "priced"}
    ledger.append(row)  # it reached the ledger...
    outbox.append(ledger.url, row)  # ...and the outbox still holds it (the crash)
    outbox.append(ledger.url, {**row, "leg_id": "w-2"})
    assert Ledger().replayed == 1  # only w-2 was missing
    rows = Ledger().rows()
    assert sorted(r["leg_id"] for r in rows) == ["w-1", "w-2"]
    assert outbox.pending(ledger.url) == 0


def test_a_row_the_ledger_refuses_stays_in_the_outbox_and_unreadable_lines_are_kept(
        orch_home):
    ledger = Ledger(replay=False)
    good = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
            "status": "complete"}
    outbox.append(ledger.url, good)
    outbox.append(ledger.url, {**good, "leg_id": "w-2", "no_such_column": 1})
    path = outbox.locations(ledger.url)[0]
    with open(path, "a") as fh:
        fh.write("{not json\n")
    assert Ledger().replayed == 1
    kept = path.read_text().splitlines()
    assert len(kept) == 2 and "{not json" in kept and "no_such_column" in "".join(kept)


def test_an_outbox_write_that_fails_midway_leaves_no_half_line(orch_home, monkeypatch):
    import os

    url = default_url()
    row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
           "status": "complete"}
    outbox.append(url, row)
    real_write = os.write

    def short(fd, data):
        return real_write(fd, data[: len(data) // 2])  # the disk filled halfway

    monkeypatch.setattr(os, "write", short)
    monkeypatch.setenv("ORCH_OUTBOX_DIR", str(outbox.locations(url)[0].parent))  # no fallback
    with pytest.raises(OSError, match="no outbox location took the row"):
        outbox.append(url, {**row, "leg_id": "w-2"})
    monkeypatch.setattr(os, "write", real_write)
    lines = outbox.locations(url)[0].read_text().splitlines()
    assert [json.loads(x)["row"]["leg_id"] for x in lines] == ["w-1"]


def test_a_row_json_cannot_hold_is_still_journaled(orch_home):
    loop: list = []
    loop.append(loop)
    row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
           "status": "complete", "reason": loop}
    outbox.append(default_url(), row)
    assert outbox_lines(default_url())[0]["row"]["leg_id"] == "w-1"
