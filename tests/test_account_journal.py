"""A journal before the wire: each request is journaled (fsync'd, with its claim) before it
is sent and settled when its answer is recorded, so a ``kill -9`` leaves every request the
provider may bill either in the ledger or as "in flight at the kill: may be billed, at most
$X" in `orch status`, `orch spend` and the run's account.

The real `orch fanout` against the scripted server, on SQLite and PostgreSQL. Leg ``a``'s
second request is answered by the server while the orch process is stopped (SIGSTOP from
the server's reply), then the process is killed: the provider billed an answer orch never
recorded — before, the ledger had no row and nothing said a request may have been billed.
Leg ``b``'s request hangs: it may be billed or not, orch cannot know.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
PRICE = 100_000.0  # $ per million output tokens, $0.10 a token; 10 reserved: $1 a claim


def wait_for(check, timeout: float = 90.0, what: str = "") -> None:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_every_request_answered_before_a_kill_is_a_row_or_in_flight_at_most_its_claim(
        ledger_url, orch, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    orch.provider(input_cost_per_mtok=0.0, output_cost_per_mtok=PRICE, max_output_tokens=10)
    proc: list[subprocess.Popen] = []

    def leg_a(body, n):
        if n == 0:  # a tool call, answered and recorded
            return Reply(tool_calls=[{"name": "list", "arguments": {}}], latency=0.5,
                         usage={"prompt_tokens": 30, "completion_tokens": 7})
        os.kill(proc[0].pid, signal.SIGSTOP)  # orch cannot record what comes back now
        return Reply(text="answered, never recorded", usage={"prompt_tokens": 40,
                                                            "completion_tokens": 9})

    scripted_server.script("a", leg_a)
    scripted_server.script("b", Reply(hang=True))
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    proc.append(subprocess.Popen(
        [*ORCH, "fanout", "-m", "scripted/a,scripted/b", "-p", "List the folder.",
         "--workspace", str(tmp_path), "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env))
    try:
        wait_for(lambda: [r.status for r in scripted_server.requests_for("a")] == [200, 200],
                 what="a's second answer, sent to the stopped process")
        proc[0].kill()
        proc[0].communicate(timeout=60)
    finally:
        if proc[0].poll() is None:
            proc[0].kill()
            proc[0].communicate()
    assert [r.status for r in scripted_server.requests_for("b")] in ([None], [])
    wave_id = next(p.name for p in (orch_home / "runs").iterdir() if p.is_dir()
                   and p.name[-2:] not in ("-1", "-2"))

    spent = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert spent.exit_code == 0, spent.output
    rollup = json.loads(spent.stdout)
    # the ledger: a's first answer ($0.70), in flight when the process died
    assert rollup["legs"] == 1 and rollup["total_cost_usd"] == pytest.approx(0.7)
    # the journal: a's second request (answered, unrecorded) and b's, at most $1 each
    assert rollup["in_flight_at_kill"] == {"requests": 2, "at_most_usd": pytest.approx(2.0),
                                           "unpriced": 0}
    text = CliRunner().invoke(cli, ["spend", "--since", "all"])
    assert "2 request(s) in flight at the kill: may be billed, at most $2.0000" in text.output

    status = CliRunner().invoke(cli, ["status", wave_id, "--json"])
    doc = json.loads(status.stdout)
    flying = doc["in_flight_at_kill"]
    assert (flying["requests"], flying["at_most_usd"]) == (2, pytest.approx(2.0))
    assert sorted((e["leg_id"][-1], e["request"]) for e in flying["legs"]) == [("1", 2),
                                                                              ("2", 1)]
    shown = CliRunner().invoke(cli, ["status", wave_id])
    assert "2 request(s) in flight at the kill: may be billed, at most $2.0000" in shown.output
    # every request the provider answered is a row's or an entry's
    rows_seq = {leg["leg_id"]: leg.get("billed", 0) for leg in doc["legs"]}
    answered_a = len([r for r in scripted_server.requests_for("a") if r.status == 200])
    in_flight_a = [e for e in flying["legs"] if e["leg_id"].endswith("-1")]
    assert answered_a == rows_seq[f"{wave_id}-1"] + len(in_flight_a) == 2


def test_a_wave_that_ends_leaves_no_journal(orch, scripted_server, orch_home):
    from orchestrator.account.journal import folders
    from orchestrator.ledger.connection import default_url

    orch.provider(input_cost_per_mtok=0.0, output_cost_per_mtok=PRICE, max_output_tokens=10)
    scripted_server.script("m", Reply(text="ok", usage={"prompt_tokens": 5,
                                                        "completion_tokens": 3}))
    run = orch.run_leg("m")
    assert run.leg["status"] == "complete"
    assert not any(f.exists() and any(f.iterdir()) for f in folders(default_url()))
