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


def test_retry_failed_keeps_the_ceiling(priced, scripted_server):
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "5",
                              "--json").stdout)
    assert [leg["status"] for leg in first["legs"]] == ["complete", "refused"]
    retry = fanout("--retry-failed", first["wave_id"], "--json")
    doc = json.loads(retry.stdout)
    assert doc["options"]["max_cost"] == 5.0
    assert retry.exit_code == 0 and doc["legs"][0]["status"] == "complete"
