"""A bench's ceiling is its account's, read from the ledger: `orch bench resume` after a
``kill -9`` (any number of times, and ``--retry-excluded`` after) never spends past the
bench's ``--max-cost``; a request in flight at a kill is "may be billed, at most $X", held
against the ceiling and never sent again without saying so; launches wait for the others'
open claims to settle instead of excluding trials the ceiling could pay for; and the
launch claim counts what the first request carries.

Prices make each trial's claim and cost exact: output only, $0.10 a token, the model's
output ceiling declared (so a request reserves exactly that many tokens).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]
PRICE = 100_000.0  # $ per million output tokens: $0.10 a token
TRIALS = 14


def task_of(body) -> str:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return re.search(r"Task (t\d+)", prompt).group(1)


def write_bench(tmp_path: Path, *, jobs: int) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    for n in range(1, TRIALS + 1):
        task = f"t{n:02d}"
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: reply with CODE-{task}.",
             "expect": {"contains": [f"CODE-{task}"]}, "solution": f"CODE-{task}"}))
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1
        jobs = {jobs}
        max_cost = 10

        [[contestants]]
        name = "m"
        model = "scripted/m"
        tools = "none"
        """))
    return config


def priced(orch, reserve: int) -> None:
    """Each request reserves ``reserve`` output tokens: a claim of ``reserve`` × $0.10."""
    orch.provider(input_cost_per_mtok=0.0, output_cost_per_mtok=PRICE,
                  max_output_tokens=reserve)


def answered(server) -> list:
    return [r for r in server.chats if r.status == 200]


def wait_for(check, timeout: float = 90.0, what: str = "") -> None:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# -- resumed after kill -9, any number of times -----------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_bench_killed_and_resumed_again_and_again_never_spends_past_its_ceiling(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """14 trials of $1 under $10, one at a time. The first run is killed while its 6th
    request is on the wire ($5 billed), the resume while its 3rd is ($7 billed): each
    request in flight at a kill may be billed, so it holds its $1 and its trial is not sent
    again. Before, the resume restarted the ceiling from $0 ($11, then $14 with
    --retry-excluded)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no daemon
    priced(orch, reserve=10)
    hang = {5, 8}  # the 6th and the 9th request overall never get an answer

    def reply(body, n):
        if n in hang:
            return Reply(hang=True)
        return Reply(text=f"CODE-{task_of(body)}", usage={"prompt_tokens": 40,
                                                          "completion_tokens": 10})

    scripted_server.script("m", reply)
    config = write_bench(tmp_path, jobs=1)
    out = tmp_path / "results.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))

    def killed(argv: list[str], requests: int) -> None:
        proc = subprocess.Popen([*ORCH, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
        try:
            wait_for(lambda: scripted_server.count("m") >= requests,
                     what=f"request {requests} on the wire")
            time.sleep(0.3)
            proc.kill()
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    killed(["bench", "--config", str(config), "--yes", "--out", str(out), "-q"], 6)
    assert len(answered(scripted_server)) == 5
    status = CliRunner().invoke(cli, ["spend", "--since", "all"])
    assert "1 request(s) in flight at the kill: may be billed, at most $1.0000" in \
        status.output, status.output

    killed(["bench", "resume", str(out), "--yes", "-q"], 9)
    assert len(answered(scripted_server)) == 7  # $5 + $1 in flight left $4: two, then a third
    t06 = [r for r in scripted_server.chats if task_of(r.body) == "t06"]
    assert len(t06) == 1  # in flight at the kill: not sent again

    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["bench", "resume", str(out), "--yes", "--json"])
    assert done.exit_code == 2, done.output  # trials the ceiling excluded
    doc = json.loads(done.stdout)
    assert len(answered(scripted_server)) == 8  # $9 held: one more, never past $10
    rows = {t["task"]: t for t in doc["trials"]}
    for task in ("t06", "t09"):
        assert rows[task]["excluded"] == ("nothing billed before the kill; 1 request(s) in "
                                          "flight at the kill: may be billed, at most "
                                          "$1.0000: not sent again"), rows[task]
    refused = [t for t in doc["trials"] if str(t["excluded"]).startswith("not launched: "
                                                                          "COST_CEILING")]
    assert sorted(t["task"] for t in refused) == ["t11", "t12", "t13", "t14"]
    assert sum(t["cost_usd"] or 0 for t in doc["trials"]) == pytest.approx(8.0)

    again = CliRunner().invoke(cli, ["bench", "resume", str(out), "--yes", "--json",
                                     "--retry-excluded"])
    assert again.exit_code == 2, again.output
    assert len(answered(scripted_server)) == 8  # nothing is left of the $10
    spent = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert json.loads(spent.stdout)["total_cost_usd"] == pytest.approx(8.0)
    assert json.loads(spent.stdout)["in_flight_at_kill"]["at_most_usd"] == pytest.approx(2.0)


# -- launches wait for claims to settle --------------------------------------------------------

def test_with_8_jobs_launches_wait_for_open_claims_instead_of_excluding_trials(
        orch, scripted_server, orch_home, tmp_path):
    """Each trial claims $4.10 and costs $1. Before, two launched and the other twelve were
    excluded at once ($2 spent); a launch now waits for the claims in its way to settle."""
    priced(orch, reserve=41)
    scripted_server.script("m", lambda body, n: Reply(
        text=f"CODE-{task_of(body)}", latency=0.3,
        usage={"prompt_tokens": 40, "completion_tokens": 10}))
    config = write_bench(tmp_path, jobs=8)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["bench", "--config", str(config), "--yes", "--out",
                                      str(out), "--json", "-q"])
    doc = json.loads(out.read_text())
    passed = [t for t in doc["trials"] if t["passed"]]
    excluded = [t for t in doc["trials"] if t["excluded"]]
    # run while what is spent leaves room for one more claim: $6 spent, $5.9 + $4.10 > $10
    assert (len(passed), len(excluded)) == (6, 8), result.output
    assert all(t["excluded"].startswith("not launched: COST_CEILING") for t in excluded)
    assert len(answered(scripted_server)) == 6
    assert sum(t["cost_usd"] or 0 for t in doc["trials"]) == pytest.approx(6.0)
    # `orch bench resume --no-daemon` is an option of the resume too
    resumed = CliRunner().invoke(cli, ["bench", "resume", str(out), "--no-daemon", "--yes"])
    assert resumed.exit_code == 0 and "nothing to run" in resumed.output, resumed.output
    assert len(answered(scripted_server)) == 6


# -- the launch claim counts the first request as it will be sent ------------------------------

def test_the_launch_claim_counts_the_system_prompt_and_the_tool_schemas(
        orch, scripted_server, orch_home, tmp_path):
    """Before, the launch claimed the briefing alone, the leg launched, and its first request
    (with its system prompt and tool schemas) could not fit: it went out as the ceiling's
    final request, or the leg ended BUDGET_CEILING. Now the launch is refused before any
    request."""
    from orchestrator.models.estimate import estimate_text

    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=0.0)
    scripted_server.script("m", Reply(text="done", usage={"prompt_tokens": 10,
                                                          "completion_tokens": 1}))
    briefing = "List the folder."
    wide = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", briefing,
                                    "--workspace", str(tmp_path), "--max-cost", "100",
                                    "--json"])
    first = json.loads(wide.stdout)["legs"][0]
    claimed = first["cost_allowance"]
    sent = scripted_server.chats[0].body
    assert sent.get("tools")  # the workspace tools' schemas ride on the first request
    briefing_only = (estimate_text(briefing, "openai/m") + 64) / 1e6 * 1000.0
    assert claimed > briefing_only + 0.1  # the schemas and the system prompt are in it
    ceiling = (claimed + briefing_only) / 2
    before = scripted_server.count()
    narrow = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", briefing,
                                      "--workspace", str(tmp_path), "--max-cost",
                                      f"{ceiling:.6f}", "--json"])
    leg = json.loads(narrow.stdout)["legs"][0]
    assert scripted_server.count() == before  # no request at all
    assert leg["status"] == "refused" and leg["reason"].startswith("COST_CEILING"), leg
    assert narrow.exit_code != 0
