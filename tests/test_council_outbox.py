"""A council's own rows (the ``council`` table: one row per seat and chair) survive a ledger
that is locked at the moment the run ends, exactly as its spend rows do: journaled in the
outbox as one batch, replayed once by the next command that opens the ledger. Before, the
spend rows were journaled and replayed but the council rows were dropped with a notice, so
``orch council stats`` never saw the run."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner
from test_council_run import chair, run_council, script_bench

from orchestrator.cli import cli
from orchestrator.engine import ledger_sink
from orchestrator.ledger import outbox
from orchestrator.ledger.council_rows import CouncilLedger
from orchestrator.ledger.spend import Ledger, default_url


def count(home, table: str, run_id: str) -> int:
    con = sqlite3.connect(home / "ledger.db")
    try:
        return con.execute(f"select count(*) from {table} where run_id = ?",
                           (run_id,)).fetchone()[0]
    finally:
        con.close()


def journal(url: str) -> list[dict]:
    return [json.loads(x) for path in outbox.locations(url) if path.exists()
            for x in path.read_text().splitlines()]


def test_council_rows_wait_in_the_outbox_when_the_ledger_locks_as_the_run_ends(
        orch, scripted_server, orch_home, monkeypatch):
    monkeypatch.setattr(ledger_sink, "BUDGET_S", 1.0)
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    Ledger().close()  # the tables exist
    # another process takes the ledger's write lock the moment the chair is asked, and
    # holds it until the run is over: the chair's spend row and the council rows meet it
    holder = sqlite3.connect(orch_home / "ledger.db", isolation_level=None,
                             check_same_thread=False)
    answer = chair()

    def locking_chair(body, n):
        if not holder.in_transaction:
            holder.execute("BEGIN IMMEDIATE")
        return answer(body, n)

    script_bench(scripted_server, delta=locking_chair)
    try:
        result, doc = run_council()
    finally:
        assert holder.in_transaction, "the chair was never asked: the lock was never taken"
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 0, result.output
    run_id = doc["run_id"]
    waiting = [n for n in doc["notices"] if "council ledger" in n]
    assert len(waiting) == 1 and "4 row(s) wait in the outbox" in waiting[0], doc["notices"]
    assert count(orch_home, "council", run_id) == 0
    batches = [x for x in journal(default_url()) if x.get("table") == "council"]
    assert len(batches) == 1
    assert sorted(r["model"] for r in batches[0]["rows"]) == [
        "scripted/alpha", "scripted/bravo", "scripted/charlie", "scripted/delta"]
    assert outbox.pending(default_url()) >= 4
    # the judges' votes wait beside them, as their own batch (council_vote)
    votes = [x for x in journal(default_url()) if x.get("table") == "council_vote"]
    assert len(votes) == 1 and {r["run_id"] for r in votes[0]["rows"]} == {run_id}
    assert count(orch_home, "council_vote", run_id) == 0

    # the next command that opens the ledger replays them, with the chair's spend row
    spend = CliRunner().invoke(cli, ["spend"])
    assert spend.exit_code == 0, spend.output
    assert "from the ledger outbox" in spend.output
    rows = {r["model"]: r for r in CouncilLedger().rows(run_id)}
    assert sorted(rows) == ["scripted/alpha", "scripted/bravo", "scripted/charlie",
                            "scripted/delta"]
    assert rows["scripted/delta"]["verdict"] == "fix-first"
    assert rows["scripted/alpha"]["street_cred"] == 1.0
    assert count(orch_home, "council_vote", run_id) == len(votes[0]["rows"])
    assert journal(default_url()) == [] and outbox.pending(default_url()) == 0
    assert count(orch_home, "spend", run_id) == sum(len(s["legs"]) for s in doc["stages"])
    # ... exactly once: later opens find nothing more to do
    CliRunner().invoke(cli, ["spend"])
    assert count(orch_home, "council", run_id) == 4
    stats = CliRunner().invoke(cli, ["council", "stats", "--json"])
    assert {s["model"] for s in json.loads(stats.output)} >= {"scripted/alpha",
                                                             "scripted/delta"}


def test_a_council_batch_replayed_after_a_crash_between_insert_and_rewrite_counts_once(
        orch_home):
    rows = [{"run_id": "r1", "model": "p/a", "role": "seat", "status": "reviewed",
             "reviewed": True},
            {"run_id": "r1", "model": "p/c", "role": "chair", "status": "verdict",
             "verdict": "ship"}]
    ledger = Ledger(replay=False)
    CouncilLedger().append(rows)  # it reached the table...
    outbox.append_batch(ledger.url, "council", rows)  # ...and the journal still holds it
    outbox.append_batch(ledger.url, "council", [{**r, "run_id": "r2"} for r in rows])
    assert Ledger().replayed == 2  # r2's two rows; r1 was there already
    assert [r["run_id"] for r in CouncilLedger().rows()] == ["r1", "r1", "r2", "r2"]
    assert outbox.pending(ledger.url) == 0


def test_a_council_batch_the_ledger_refuses_stays_in_the_journal(orch_home):
    url = Ledger(replay=False).url
    outbox.append_batch(url, "council", [{"run_id": "r1", "model": "p/a", "role": "seat",
                                          "status": "reviewed"}])
    path = outbox.locations(url)[0]
    # a row of a newer orch (a column this ledger lacks): never dropped, never half-inserted
    with path.open("a") as fh:
        fh.write(json.dumps({"table": "council", "rows": [
            {"run_id": "r2", "model": "p/a", "role": "seat", "status": "reviewed"},
            {"run_id": "r2", "model": "p/b", "role": "seat", "status": "x", "new": 1}]})
            + "\n")
    assert Ledger().replayed == 1
    assert [r["run_id"] for r in CouncilLedger().rows()] == ["r1"]
    kept = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["rows"][0]["run_id"] == "r2"
