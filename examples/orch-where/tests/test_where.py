"""orch-where in each mode, with the kit's helpers for that mode: a council scripted with
``council_seat``/``council_chair`` and run by ``orch.run_council``, a deliberation with
``deliberator`` and ``orch.run_deliberation``, a bench trial with ``orch.run_trial``, and the
MCP schema with ``orch.mcp_tools``. Every assertion is on what orch recorded or sent."""

from __future__ import annotations

import pytest

orch_where = pytest.importorskip("orch_where")  # skipped only when not installed

from orchestrator.testing.bench_kit import write_bench  # noqa: E402
from orchestrator.testing.council_kit import council_chair, council_seat, finding  # noqa: E402
from orchestrator.testing.deliberation_kit import deliberator  # noqa: E402
from orchestrator.testing.scripted_server import Reply  # noqa: E402


def test_a_council_never_tallies_a_finding_that_says_not_where(orch, scripted_server):
    scripted_server.script("alpha", council_seat([
        finding("SQL injection in build_query", "blocker", "db.py:10"),
        finding("the code feels slow")]))  # no location
    scripted_server.script("bravo", council_seat([finding("race in the cache", "major",
                                                          "cache.py:20")]))
    scripted_server.script("chair", council_chair("fix-first"))
    run = orch.run_council(["alpha", "bravo"], plugins=[orch_where],
                           options={"unlocated": "drop"})
    assert run.verdict == "fix-first"
    assert [f["claim"] for f in run.findings("alpha")] == ["SQL injection in build_query"]
    claims = {g["claim"] for g in run.tally["groups"]}
    assert claims == {"SQL injection in build_query", "race in the cache"}
    assert [leg["unlocated_findings"] for leg in run.legs("review")] == [1, 0]
    # the judges were never shown it: no judge request names it
    judged = [b for b in run.bodies if "You are judging" in str(b["messages"])]
    assert judged and not any("feels slow" in str(b["messages"]) for b in judged)
    # without the plugin, or without --unlocated drop, the same council tallies it
    for kept in (orch.run_council(["alpha", "bravo"]),
                 orch.run_council(["alpha", "bravo"], plugins=[orch_where])):
        assert "the code feels slow" in {g["claim"] for g in kept.tally["groups"]}


def test_the_option_is_in_the_council_tool_of_orch_mcp(orch):
    schema = orch.mcp_tools(plugins=[orch_where])["council_run"]["inputSchema"]["properties"]
    assert schema["unlocated"]["enum"] == ["keep", "drop"]
    assert "unlocated" not in orch.mcp_tools()["council_run"]["inputSchema"]["properties"]


def test_a_deliberation_records_each_legs_decision_and_vote(orch, scripted_server):
    orch.config(plugin_config={"where": {"rounds": True}})
    scripted_server.script("a", deliberator("42"))
    scripted_server.script("b", deliberator("41", decision="adopt"))
    run = orch.run_deliberation(["a", "b"], "What is 6 x 7?", rounds=2, plugins=[orch_where])
    assert run.decisions(2) == {"scripted/a": "keep", "scripted/b": "adopt"}
    assert run.votes(2) == {"scripted/a": "Answer A", "scripted/b": "Answer A"}
    assert run.winner["answer"].strip() == "42"
    legs = {leg["model"]: leg for leg in run.round(2)["legs"]}
    records = {m: run.record(leg["leg_id"]) for m, leg in legs.items()}
    assert records["scripted/b"]["round_decision"] == "adopt"
    assert records["scripted/a"]["round_vote"] == "Answer A"
    round_one = run.round(1)["legs"][0]["leg_id"]
    assert "round_decision" not in run.record(round_one)  # round 1 has no reply


def test_a_bench_trial_is_asked_for_a_location_and_graded_on_it(orch, scripted_server):
    def reviewer(body, n):
        asked = body["messages"][0]["content"] == orch_where.BENCH_RULE
        return Reply(text="off by one in the loop" + (" at calc.py:7" if asked else ""))
    scripted_server.script("m", reviewer)
    orch.config(plugin_config={"where": {"bench": True}})
    run = orch.run_trial("m", "Find the bug.", expect={"contains": "calc.py:7"},
                         plugins=[orch_where])
    assert run.passed and run.trial["answer"].endswith("calc.py:7")
    assert run.bodies[0]["messages"][0] == {"role": "system", "content": orch_where.BENCH_RULE}
    without = orch.run_trial("m", "Find the bug.", expect={"contains": "calc.py:7"})
    assert not without.passed and without.trial["answer"] == "off by one in the loop"


def test_a_bench_compares_the_same_model_with_and_without_the_plugin(orch, scripted_server,
                                                                     tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    orch.config(plugin_config={"where": {"bench": True}})
    scripted_server.script("m", lambda body, n: Reply(
        text="calc.py:7" if body["messages"][0]["role"] == "system" else "in the loop"))
    bench = write_bench(tmp_path, [{"id": "bug", "task": "Find the bug.",
                                    "expect": {"contains": "calc.py:7"}}],
                        [{"name": "with", "model": "scripted/m", "tools": "none"},
                         {"name": "without", "model": "scripted/m", "tools": "none",
                          "disable_plugins": ["where"]}], trials=2)
    run = orch.run_bench(bench, plugins=[orch_where])
    passed = {(t["contestant"], t["passed"]) for t in run.trials}
    assert passed == {("with", True), ("without", False)} and len(run.trials) == 4
    assert all(t["cost_usd"] > 0 for t in run.trials)  # priced by orch.provider
    assert run.path.exists()  # the results file, as orch bench --out writes it


def test_a_fanout_leg_is_left_alone(orch, scripted_server):
    orch.config(plugin_config={"where": {"rounds": True, "bench": True}})
    scripted_server.script("m", Reply(text="hello"))
    run = orch.run_wave(["m", "n"], plugins=[orch_where])
    assert all(m["role"] != "system" for b in run.bodies for m in b["messages"])
    assert not any({"unlocated_findings", "round_decision"} & set(leg) for leg in run.legs)
