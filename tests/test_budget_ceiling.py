"""The wave cost ceiling through the real CLI: refused launches, a partial wave, exit 2."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


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
    for name in ("a", "b", "judge"):  # listed on GET /models, so the launch's check knows them
        scripted_server.script(name, scripted_server.default)
    result = fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "4.5",
                    "--chair", "scripted/judge")
    assert result.exit_code == 2
    assert "not launched" not in result.stdout and "Degraded" not in result.stdout
    assert "(scripted/b) not launched: COST_CEILING" in result.stderr
    assert "orch: warning: degraded: 1 launch(es) refused by a budget" in result.stderr
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
    scripted_server.script("e", scripted_server.default)  # listed on GET /models, as d is
    spent = json.loads(fanout("-m", "scripted/d,scripted/e", "-p", "q", "--max-cost", "1.5",
                              "--output-budget", "1000", "--json").stdout)
    assert [leg["status"] for leg in spent["legs"]] == ["complete", "refused"]
    none_left = fanout("--retry-failed", spent["wave_id"])
    assert none_left.exit_code == 1 and "nothing is left for a retry" in none_left.stderr
    assert scripted_server.count("e") == 0  # refused by the ceiling, never sent
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


# -- the bound, on the wire ----------------------------------------------------------------------

class EchoTool:
    """A tool every leg may call, so a leg takes as many steps as its replies ask for."""

    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda **kw: "e")]


def provider_counting(ratio: float, steps: int, out_share: float, seen: list):
    """A provider whose prompt count is ``ratio`` x orch's own estimate of what it received,
    whose output is ``out_share`` of what the request reserved (never more), and whose legs
    call the tool until they took ``steps`` steps. Each request's reported input goes to
    ``seen``."""
    from orchestrator.models.estimate import estimate_messages

    def reply(body, n):
        estimate = estimate_messages(body["messages"], body.get("tools"))
        prompt = max(1, math.ceil(ratio * estimate))
        out = max(1, int(out_share * int(body.get("max_tokens") or 4096)))
        seen.append(prompt)
        usage = {"prompt_tokens": prompt, "completion_tokens": out}
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if body.get("tools") and done + 1 < steps:
            return Reply(tool_calls=[{"name": "echo", "arguments": {}}], usage=usage)
        return Reply(text="an answer", usage=usage)
    return reply


@pytest.mark.timeout(600)
@settings(max_examples=14, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(legs=st.integers(1, 16), ratio=st.floats(0.5, 3.0), steps=st.integers(1, 3),
       price_in=st.sampled_from([0.1, 3.0, 60.0, 1000.0]),
       price_out=st.sampled_from([0.4, 15.0, 1000.0]),
       out_share=st.sampled_from([0.25, 1.0]), budget=st.integers(256, 2000),
       words=st.integers(5, 3000), share=st.floats(0.05, 1.2))
@example(legs=16, ratio=3.0, steps=3, price_in=1000.0, price_out=0.4, out_share=0.25,
         budget=256, words=3000, share=0.5)  # input dominates, every first claim runs low
@example(legs=16, ratio=0.5, steps=3, price_in=3.0, price_out=1000.0, out_share=1.0,
         budget=2000, words=50, share=0.3)
def test_property_spend_passes_the_ceiling_by_at_most_c_requests_input(
        orch, scripted_server, legs, ratio, steps, price_in, price_out, out_share, budget,
        words, share):
    """docs/budgets.md: with C legs at once the known spend passes the ceiling by at most
    what C requests' input cost beyond their claims, so by at most C requests' reported
    input; and never when the provider counts no more than orch estimated."""
    orch.provider(input_cost_per_mtok=price_in, output_cost_per_mtok=price_out)
    seen: list[int] = []
    scripted_server.script("m", provider_counting(ratio, steps, out_share, seen))
    briefing = "word " * words
    per_request = (words * 2 * price_in + budget * price_out) / 1e6
    ceiling = round(share * legs * steps * per_request, 6)
    run = orch.run_wave(["m"] * legs, briefing, plugins=[EchoTool()], max_steps=steps + 1,
                        options={"max_cost": ceiling, "output_budget": budget, "tools": "read"})
    spent = run.doc["cost_usd"]
    assert len(seen) == len(run.requests)
    bound = sum(sorted((p * price_in / 1e6 for p in seen), reverse=True)[:legs])
    assert spent <= ceiling + bound + 1e-9, (spent, ceiling, bound)
    if ratio <= 0.8:  # every claim held: within the ceiling itself
        assert spent <= ceiling + 1e-9, (spent, ceiling)
    assert (run.doc["over_ceiling_usd"] is not None) == (spent > ceiling + 1e-9)
    if spent > ceiling + 1e-9:
        assert run.doc["exit_code"] != 0  # never a clean run past its ceiling


def test_the_safety_factor_learned_from_the_first_answer_holds_the_next_claim(
        orch, scripted_server):
    """A provider that counts 3x orch's estimate: the first request ran past its claim, but
    the next one claims the provider's own count (anchored) plus 3x the estimate of what was
    added, so it is not sent where it could not fit. Before, it claimed orch's estimate
    alone, was sent, and the wave passed its ceiling."""
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1.0)
    briefing = "word " * 2000
    options = {"output_budget": 300, "tools": "read"}
    probe: list[int] = []  # the same wave without a ceiling: what each request counts
    scripted_server.script("m", provider_counting(3.0, 2, 1.0, probe))
    orch.run_wave(["m"], briefing, plugins=[EchoTool()], max_steps=3, options=options)
    assert len(probe) == 2
    first = (probe[0] * 1000.0 + 300 * 1.0) / 1e6
    # room for the second request's estimate (a third of its count), not for its count
    ceiling = round(first + (2 / 3) * probe[1] * 1000.0 / 1e6, 6)
    seen: list[int] = []
    scripted_server.script("m", provider_counting(3.0, 2, 1.0, seen))
    run = orch.run_wave(["m"], briefing, plugins=[EchoTool()], max_steps=3,
                        options={**options, "max_cost": ceiling})
    assert seen == probe[:1]  # the second request was not sent
    assert run.leg["reason"].startswith("BUDGET_CEILING") and run.leg["status"] == "refused"
    assert run.doc["cost_usd"] <= ceiling and run.doc["over_ceiling_usd"] is None
