"""A run's account opens from the record, on SQLite and PostgreSQL: the ledger's rows of the
run (each leg's bound where a cost was not read), the outbox's, and the requests a killed
process left in flight (the request journal) — never from a settings file. A ledger that does
not answer within the deadline leaves the outbox, the journal and the run's files."""

from __future__ import annotations

import json
import subprocess

import pytest

from orchestrator.account import Account
from orchestrator.account.journal import folders
from orchestrator.engine.ledger_sink import LedgerSink
from orchestrator.ledger import outbox
from orchestrator.ledger.spend import Ledger


def row(wave: str, leg: str, **extra) -> dict:
    return {"wave_id": wave, "leg_id": leg, "kind": "bench", "model": "p/m", "provider": "p",
            "status": "complete", "cost_source": "declared", "seq": 1, "run_id": "bench-x",
            **extra}


def journaled(url: str, wave: str, leg: str, n: int, claim: float) -> None:
    """A journal line of a process that is gone (a child that already exited)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = folders(url)[0]
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"wave_id": wave, "leg_id": leg, "run_id": "bench-x", "n": n, "model": "p/m",
             "claim_usd": claim, "pid": dead.pid, "pid_started": "0",
             "ts": "2030-01-01T00:00:00+00:00"}
    with open(folder / f"{wave}.jsonl", "a") as fh:
        fh.write(json.dumps({"sent": entry}) + "\n")


def test_the_account_of_a_run_is_what_the_record_holds(ledger_url):
    ledger = Ledger()
    ledger.append(row("bench-x-1", "bench-x-1-1", cost_usd=1.0))
    ledger.append(row("bench-x-1", "bench-x-1-2", cost_usd=None, cost_source="unknown",
                      cost_bound_usd=4.17))  # its answer's cost could not be read
    ledger.append(row("bench-x", "bench-x-0005", provider="command", cost_usd=3.0,
                      cost_source="reported", seq=None))  # a command: not under the ceiling
    ledger.append(row("bench-y-1", "bench-y-1-1", cost_usd=5.0))  # another bench
    outbox.append(ledger_url, row("bench-x-t0003", "bench-x-t0003-1", cost_usd=0.5))
    journaled(ledger_url, "bench-x-r1-1", "bench-x-r1-1-1", 1, 1.0)  # never answered
    journaled(ledger_url, "bench-x-1", "bench-x-1-1", 1, 2.0)  # its answer is the row
    account = Account.open("bench-x", {"max_cost": 10}, skip_providers=("command",))
    held = account.prior
    assert held.unreadable is None
    assert (held.known_usd, held.bound_usd) == (pytest.approx(1.5), pytest.approx(4.17))
    assert [(e.leg_id, e.claim_usd, e.alive) for e in held.in_flight] == [
        ("bench-x-r1-1-1", 1.0, False)]
    assert account.committed() == pytest.approx(6.67)
    assert account.left("max_cost") == pytest.approx(3.33)


def test_a_ledger_past_its_deadline_leaves_the_outbox_the_journal_and_the_files(ledger_url):
    Ledger().append(row("bench-x-1", "bench-x-1-1", cost_usd=1.0))
    outbox.append(ledger_url, row("bench-x-1", "bench-x-1-2", cost_usd=0.5))
    journaled(ledger_url, "bench-x-1", "bench-x-1-1", 1, 2.0)
    spent = LedgerSink(budget_s=0.0)  # the deadline is spent: the ledger is not asked
    account = Account.open("bench-x", {"max_cost": 10}, sink=spent,
                           files={"bench-x-1-1": 1.0})
    held = account.prior
    assert held.unreadable == "it did not answer in time"
    # the outbox's row, the row its own files know, and the journaled request its ledger
    # row would have settled, counted in flight: more, never less
    assert held.known_usd == pytest.approx(1.5)
    assert held.in_flight_usd == pytest.approx(2.0)
    assert account.left("max_cost") == pytest.approx(6.5)
