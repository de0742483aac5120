"""The wave cost ceiling through the real CLI: refused launches, a partial wave, exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def fanout(*args: str):
    return CliRunner().invoke(cli, ["fanout", "--tools", "none", *args])


def ledger(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


@pytest.fixture
def priced(orch, scripted_server):
    # $1 per million input tokens, $1,000 per million output: a 4,096-token output
    # reservation (nothing smaller is known) makes each launch's allowance about $4.10.
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.default = Reply(text="an answer", usage={"prompt_tokens": 20,
                                                             "completion_tokens": 10})
    return orch


def test_a_ceiling_refusal_leaves_a_partial_wave_with_exit_2(priced, scripted_server, orch_home):
    result = fanout("-m", "scripted/a,scripted/b,scripted/c", "-p", "q", "--max-cost", "10",
                    "--chair", "scripted/judge", "--json")
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "partial"
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "complete", "refused"]
    refused = doc["legs"][2]
    assert refused["reason"].startswith("COST_CEILING: scripted/c could cost up to $4.09")
    assert "of the $10 ceiling is spent or claimed" in refused["reason"]
    assert [r["leg_id"] for r in doc["budget_refusals"]] == [refused["leg_id"]]
    assert scripted_server.count("c") == 0
    # by the chair's turn the legs' real spend ($0.01 each) replaced their allowances
    assert doc["chair"]["status"] == "complete" and scripted_server.count("judge") == 1
    wave_json = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert wave_json["budget_refusals"] == doc["budget_refusals"] and wave_json["exit_code"] == 2
    assert any(n.startswith(f"{refused['leg_id']} (scripted/c) not launched: COST_CEILING")
               for n in doc["notices"])
    rows = {r["leg_id"]: r for r in ledger(orch_home)}
    assert rows[refused["leg_id"]]["status"] == "refused"
    assert rows[refused["leg_id"]]["cost_usd"] == 0
    assert doc["cost_usd"] <= 10


def test_the_notice_is_printed_and_the_chair_can_be_refused(priced, scripted_server):
    result = fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "4.5",
                    "--chair", "scripted/judge")
    assert result.exit_code == 2
    assert "Notice: " in result.stdout and "(scripted/b) not launched: COST_CEILING" \
        in result.stdout
    assert "Degraded: 1 launch(es) refused by a budget" in result.stdout
    # a ($0.01 spent) + the chair's $4.10 allowance still fits under $4.50
    assert scripted_server.count("judge") == 1
    # a leg that really spends $0.50 leaves no room for the chair's $4.00 allowance
    scripted_server.script("a", Reply(text="long", usage={"prompt_tokens": 20,
                                                          "completion_tokens": 500}))
    refused_chair = fanout("-m", "scripted/a", "-p", "q", "--max-cost", "4.1",
                           "--output-budget", "4000", "--chair", "scripted/judge", "--json")
    doc = json.loads(refused_chair.stdout)
    assert doc["legs"][0]["status"] == "complete"
    assert doc["chair"]["status"] == "refused" and refused_chair.exit_code == 2
    assert "$0.5000 of the $4.1 ceiling is spent or claimed" in doc["chair"]["reason"]
    assert scripted_server.count("judge") == 1  # still only the first wave's chair


def test_within_the_ceiling_nothing_changes(priced, scripted_server):
    result = fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "100", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["budget_refusals"] == [] and doc["degraded"] == []
    assert all(leg["cost_allowance"] > 4 for leg in doc["legs"])


def test_unknown_cost_under_a_ceiling_exits_2_with_cost_exact_false(orch, scripted_server):
    orch.provider()  # no prices: every cost is unknown
    result = fanout("-m", "scripted/a", "-p", "q", "--max-cost", "1", "--json")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["status"] == "complete" and doc["cost_exact"] is False
    assert doc["legs"][0]["cost_allowance"] is None  # launched: nothing to hold it against
    assert any("the wave's total is only a floor" in n for n in doc["notices"])
    assert doc["degraded"][0].startswith("cost ceiling $1 set but 1 leg(s)' cost is unknown")
    # without a ceiling the same wave is a clean run
    assert fanout("-m", "scripted/a", "-p", "q", "--json").exit_code == 0


def test_retry_failed_inherits_what_is_left_of_the_ceiling(orch, scripted_server, orch_home):
    # $4 a leg at most (4,000 output tokens at $1,000/Mtok): $9 holds two launches
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.script("a", Reply(text="a says", usage={"prompt_tokens": 20,
                                                            "completion_tokens": 4000}))
    scripted_server.script("b", Reply(status=500), Reply(text="b says", usage={
        "prompt_tokens": 20, "completion_tokens": 4000}))
    scripted_server.script("c", Reply(text="c says", usage={"prompt_tokens": 20,
                                                            "completion_tokens": 4000}))
    first = json.loads(fanout("-m", "scripted/a,scripted/b,scripted/c", "-p", "q",
                              "--max-cost", "9", "--output-budget", "4000", "--json").stdout)
    assert [leg["status"] for leg in first["legs"]] == ["complete", "error", "refused"]
    assert first["cost_usd"] == pytest.approx(4.00002)
    retry = fanout("--retry-failed", first["wave_id"], "--json")
    doc = json.loads(retry.stdout)
    # what is left: $9 - $4.00002; b fits, c does not
    assert doc["options"]["max_cost"] == pytest.approx(9 - 4.00002)
    assert doc["options"]["max_cost_family"]["root"] == first["wave_id"]
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "refused"]
    assert retry.exit_code == 2
    again = json.loads(fanout("--retry-failed", doc["wave_id"], "--json").stdout)
    assert [leg["status"] for leg in again["legs"]] == ["refused"]  # $0.99998 left < $4
    total = sum(r["cost_usd"] for r in ledger(orch_home))
    assert total <= 9 and total == pytest.approx(8.00004)
    assert scripted_server.count("c") == 0
    # once the family spent it all, a retry is refused before anything, unless given its own
    scripted_server.script("d", Reply(text="d", usage={"prompt_tokens": 20,  # past its claim
                                                       "completion_tokens": 1500}))
    spent = json.loads(fanout("-m", "scripted/d,scripted/e", "-p", "q", "--max-cost", "1.5",
                              "--output-budget", "1000", "--json").stdout)
    assert [leg["status"] for leg in spent["legs"]] == ["complete", "refused"]
    none_left = fanout("--retry-failed", spent["wave_id"])
    assert none_left.exit_code == 1 and "nothing is left for a retry" in none_left.stderr
    own = fanout("--retry-failed", spent["wave_id"], "--max-cost", "5", "--json")
    assert own.exit_code == 0 and json.loads(own.stdout)["options"]["max_cost"] == 5.0


def test_the_retried_chair_reads_every_complete_answer(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="ANSWER-FROM-A"))
    scripted_server.script("b", Reply(status=500), Reply(text="ANSWER-FROM-B"))
    scripted_server.script("judge", Reply(text="synthesis"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--chair",
                              "scripted/judge", "--json").stdout)
    assert [leg["status"] for leg in first["legs"]] == ["complete", "error"]
    retry = json.loads(fanout("--retry-failed", first["wave_id"], "--json").stdout)
    assert [leg["model"] for leg in retry["legs"]] == ["scripted/b"]
    assert retry["chair"]["status"] == "complete" and retry["exit_code"] == 0
    packet = scripted_server.requests_for("judge")[-1].body["messages"][-1]["content"]
    assert "ANSWER-FROM-A" in packet and "ANSWER-FROM-B" in packet
    assert "## The answers (2)" in packet


def test_a_failed_chair_alone_can_be_retried(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="ANSWER-FROM-A"))
    scripted_server.script("b", Reply(text="ANSWER-FROM-B"))
    scripted_server.script("judge", Reply(status=500), Reply(text="synthesis"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--chair",
                              "scripted/judge", "--json").stdout)
    assert first["chair"]["status"] == "error" and first["status"] == "partial"
    retry = fanout("--retry-failed", first["wave_id"], "--json")
    doc = json.loads(retry.stdout)
    assert doc["legs"] == [] and doc["chair"]["status"] == "complete"
    assert retry.exit_code == 0 and doc["retry_of"] == first["wave_id"]
    assert scripted_server.count("a") == scripted_server.count("b") == 1  # not re-run
    packet = scripted_server.requests_for("judge")[-1].body["messages"][-1]["content"]
    assert "ANSWER-FROM-A" in packet and "ANSWER-FROM-B" in packet
    nothing = fanout("--retry-failed", doc["wave_id"])
    assert nothing.exit_code == 0 and "nothing to retry" in nothing.stderr
