"""Exactly once in the database: a leg's durable row is keyed on ``(wave_id, leg_id)`` among
rows with ``seq`` (migration 0003), and every write and replay is insert-or-advance on that
key. Two hosts replaying one journal at once leave one row per leg holding every request."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from orchestrator.ledger import outbox
from orchestrator.ledger.in_flight import IN_FLIGHT
from orchestrator.ledger.spend import Ledger

LEGS, STEPS = 120, 3


def journal_of_a_killed_wave(url: str) -> list[dict]:
    """Each leg's lines as a wave journals them: in flight after each answer, then its end."""
    rows = []
    for leg in range(1, LEGS + 1):
        for seq in range(1, STEPS + 1):
            rows.append({"wave_id": "w", "leg_id": f"w-{leg}", "kind": "leg", "model": "p/m",
                         "provider": "p", "status": "aborted", "reason": IN_FLIGHT,
                         "input_tokens": 10 * seq, "output_tokens": seq, "cost_usd": 0.01 * seq,
                         "cost_source": "declared", "seq": seq})
        rows.append({**rows[-1], "status": "complete", "reason": None})
    for row in rows:
        outbox.append(url, row)
    return rows


@pytest.mark.slow
def test_two_processes_replaying_one_journal_at_once_write_each_request_once(
        ledger_url, orch_home, tmp_path):
    Ledger(ledger_url).close()  # the schema exists; the journal waits in ORCH_OUTBOX_DIR
    journal_of_a_killed_wave(ledger_url)
    (journal,) = [p for p in outbox.locations(ledger_url) if p.exists()]
    hosts = []
    for name in ("a", "b"):  # two hosts, each with its own copy of the journal
        spool = tmp_path / f"spool-{name}"
        spool.mkdir()
        shutil.copy(journal, spool / journal.name)
        hosts.append(spool)
    journal.unlink()
    code = ("import sys; from orchestrator.ledger.spend import Ledger; "
            "sys.stdin.readline(); print(Ledger().replayed)")
    procs = [subprocess.Popen([sys.executable, "-c", code], text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, ORCH_OUTBOX_DIR=str(spool),
                                       ORCH_HOME=str(tmp_path / f"home-{spool.name}")))
             for spool in hosts]
    for proc in procs:  # imported and waiting: released together
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    rows = Ledger(ledger_url).rows(wave_id="w")
    assert len(rows) == LEGS  # one row per leg, not one per line nor per host
    assert {r["seq"] for r in rows} == {STEPS} and {r["status"] for r in rows} == {"complete"}
    assert sum(r["input_tokens"] for r in rows) == LEGS * 10 * STEPS  # the last answer's
    assert all(not any(spool.iterdir()) for spool in hosts)  # both journals emptied


def test_a_row_only_moves_forward(ledger_url, orch_home):
    ledger = Ledger(ledger_url)
    base = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
            "cost_source": "declared"}
    flying = {**base, "status": "aborted", "reason": IN_FLIGHT}
    ledger.append({**flying, "seq": 2, "input_tokens": 20})
    ledger.append({**flying, "seq": 1, "input_tokens": 10})  # a late replay: behind
    assert [(r["seq"], r["input_tokens"]) for r in ledger.rows()] == [(2, 20)]
    ledger.append({**base, "status": "error", "reason": "timeout", "seq": 2,
                   "input_tokens": 20})  # the leg's end at the same count replaces it
    ledger.append({**flying, "seq": 2, "input_tokens": 20})  # its in-flight line, replayed
    ledger.append({**base, "status": "complete", "seq": 2, "input_tokens": 99})  # a second end
    assert [(r["status"], r["seq"], r["input_tokens"]) for r in ledger.rows()] == [
        ("error", 2, 20)]
    ledger.append({**base, "status": "complete", "seq": 0})  # behind as well
    ledger.append({**base, "leg_id": "w-2", "status": "complete"})  # rows without seq (a
    ledger.append({**base, "leg_id": "w-2", "status": "complete"})  # plugin's) as before
    assert len(ledger.rows()) == 3
    with pytest.raises(ValueError, match="seq -1 is not a request count"):
        ledger.append({**base, "status": "complete", "seq": -1})


def test_billed_legs_reads_the_ledger_and_the_outbox_furthest_first(ledger_url, orch_home):
    """What retries and repair plan from: per leg, the furthest of the ledger's row and the
    outbox's lines, and whether the leg ended or completed."""
    from orchestrator.ledger.billed import billed_legs

    ledger = Ledger(ledger_url)
    base = {"wave_id": "w", "kind": "leg", "model": "p/m", "provider": "p",
            "cost_source": "declared", "status": "aborted", "reason": IN_FLIGHT}
    ledger.append({**base, "leg_id": "w-1", "seq": 2, "input_tokens": 20, "cost_usd": 2.0})
    ledger.append({**base, "leg_id": "w-2", "seq": 1, "input_tokens": 10, "cost_usd": 1.0})
    ledger.append({**base, "leg_id": "w-4", "status": "complete", "reason": None})  # no seq
    ledger.close()
    outbox.append(ledger_url, {**base, "leg_id": "w-1", "seq": 1, "input_tokens": 10})  # behind
    outbox.append(ledger_url, {**base, "leg_id": "w-2", "seq": 1, "status": "complete",
                               "reason": None, "input_tokens": 10, "cost_usd": 1.0})
    outbox.append(ledger_url, {**base, "leg_id": "w-3", "seq": 3, "input_tokens": 30,
                               "cost_usd": 3.0})
    legs = billed_legs("w", ledger_url)
    got = {k: (b.seq, b.ended, b.complete, b.usage.input_tokens, b.cost_usd)
           for k, b in legs.items()}
    assert got == {"w-1": (2, False, False, 20, 2.0), "w-2": (1, True, True, 10, 1.0),
                   "w-3": (3, False, False, 30, 3.0), "w-4": (None, True, True, 0, None)}
    assert billed_legs("other", ledger_url) == {}
