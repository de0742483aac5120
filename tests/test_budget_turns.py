"""Turn budgets on the wire: notes at the end of the conversation, one final tool-less request."""

from __future__ import annotations

import json

from click.testing import CliRunner
from orch_plugins.turn_budget import FINAL_REQUEST, NOTES

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

NOTE = {int(level * 100): text for level, text in NOTES}


class Echo:
    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {"i": {"type": "integer"}}},
                     lambda **kw: "e")]


def explorer(body, n):
    """Explores with a tool until it is asked without tools; every step reports 300 input
    tokens, all cached, and 10 output: 40 against the budget (cached input at a tenth)."""
    usage = {"prompt_tokens": 300, "cached_tokens": 300, "completion_tokens": 10}
    if not body.get("tools"):
        return Reply(text="Found: the bug is in step 3. State: half fixed. Left: tests.",
                     usage=usage)
    return Reply(tool_calls=[{"name": "echo", "arguments": {"i": n}}], usage=usage)


def test_notes_at_50_75_90_then_one_final_request_without_tools(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", explorer)
    run = orch.run_leg("m", "find the bug", plugins=[("echo", Echo())], max_steps=40,
                       options={"leg_tokens": 1000})
    bodies = run.bodies
    # after step k, 40k tokens are spent: 520 (52 %) before request 14, 760 before 20, 920
    # before 24, 960 (96 % >= 95 %) before 25, which goes out without tools
    assert len(bodies) == 25
    last = {i + 1: b["messages"][-1].get("content") for i, b in enumerate(bodies)}
    assert last[14] == NOTE[50] and last[20] == NOTE[75] and last[24] == NOTE[90]
    assert [i for i, text in last.items() if text in NOTE.values()] == [14, 20, 24]
    assert last[25] == FINAL_REQUEST
    assert all("tools" in b for b in bodies[:24]) and "tools" not in bodies[24]
    # appended at the end: each request starts with the whole previous one, unchanged
    for before, after in zip(bodies, bodies[1:], strict=False):
        assert after["messages"][:len(before["messages"])] == before["messages"]
    leg = run.leg
    assert leg["status"] == "complete" and leg["answer"].startswith("Found: the bug")
    assert leg["stopped"] == "budget" and leg["finished"] is False
    assert leg["turn_budget"]["notes"] == [50, 75, 90]
    assert [n for n in leg["notes"] if n.startswith("turn budget: ")][-1].startswith(
        "turn budget: 96% of it is spent (960 of 1,000 tokens)")
    assert run.doc["status"] == "complete" and run.doc["exit_code"] == 2  # never a clean 0
    assert run.doc["degraded"] == [f"stopped on a budget before finishing: {leg['leg_id']}"]


def test_a_growing_conversation_gets_every_note_before_the_final_request(orch, scripted_server):
    """Each request resends the whole, growing conversation: step k costs 60k + 10 tokens.
    By the budget's marks alone the leg would go from the 50 % note (request 10, 56 %)
    straight to the final request (request 12, 81 %: one more step and a summary no longer
    fit); counted in steps left, the notes come at 3, 2 and 1 steps before it."""
    orch.provider()

    def growing(body, n):
        usage = {"prompt_tokens": 60 * (n + 1), "completion_tokens": 10}
        if not body.get("tools"):
            return Reply(text="Found: most of it.", usage=usage)
        return Reply(tool_calls=[{"name": "echo", "arguments": {"i": n}}], usage=usage)

    scripted_server.script("m", growing)
    run = orch.run_leg("m", "find the bug", plugins=[("echo", Echo())], max_steps=40,
                       options={"leg_tokens": 5000})
    last = {i + 1: b["messages"][-1].get("content") for i, b in enumerate(run.bodies)}
    assert len(run.bodies) == 12 and last[12] == FINAL_REQUEST
    notes = {i: text for i, text in last.items() if text.startswith("Budget note:")}
    assert sorted(notes) == [9, 10, 11]
    assert notes[9].startswith("Budget note: 45% of the budget for this task is spent and the "
                               "conversation grows with each step: 3 more steps with tools fit")
    assert notes[9].endswith(NOTE[50].split(". ", 1)[1])
    assert "2 more steps" in notes[10] and notes[10].endswith(NOTE[75].split(". ", 1)[1])
    assert "1 more step " in notes[11] and notes[11].endswith(NOTE[90].split(". ", 1)[1])
    assert run.leg["turn_budget"]["notes"] == [50, 75, 90]
    said = [n for n in run.leg["notes"] if n.startswith("turn budget: the 90% note")]
    assert said == ["turn budget: the 90% note, 1 tool step before the final request (3,400 "
                    "of 5,000 tokens); note appended at step 11"]
    assert run.leg["stopped"] == "budget" and run.leg["answer"] == "Found: most of it."


def test_one_more_step_and_a_summary_that_would_not_fit_ends_early(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", lambda body, n: Reply(
        text="summary" if not body.get("tools") else "",
        tool_calls=None if not body.get("tools") else [{"name": "echo", "arguments": {"i": n}}],
        usage={"prompt_tokens": 250, "completion_tokens": 50}))
    run = orch.run_leg("m", "go", plugins=[("echo", Echo())], options={"leg_tokens": 1000})
    # 300 a step: after 2 steps 600 + 2 x 300 > 1,000, so the third request is the last
    assert len(run.bodies) == 3 and "tools" not in run.bodies[2]
    assert run.bodies[2]["messages"][-1]["content"] == FINAL_REQUEST
    assert any(n.startswith("turn budget: one more step and a summary would not fit (600 of "
                            "1,000 tokens)") for n in run.leg["notes"])
    assert run.leg["answer"] == "summary" and run.leg["finished"] is False


def test_seconds_budget_through_the_cli_exits_2(orch, scripted_server, tmp_path):
    orch.provider()
    (tmp_path / "a.txt").write_text("alpha\n")
    scripted_server.script("m", lambda body, n: Reply(
        text="what I have" if not body.get("tools") else "", latency=0.15,
        tool_calls=None if not body.get("tools") else [
            {"name": "read", "arguments": {"path": "a.txt", "offset": n}}]))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "read it",
                                      "--workspace", str(tmp_path), "--leg-seconds", "1",
                                      "--json"])
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    leg = doc["legs"][0]
    assert leg["status"] == "complete" and leg["answer"] == "what I have"
    assert leg["stopped"] == "budget" and leg["finished"] is False
    assert doc["options"]["leg_seconds"] == 1.0
    bodies = scripted_server.requests_for("m")
    assert "tools" not in bodies[-1].body and all("tools" in r.body for r in bodies[:-1])
    assert bodies[-1].body["messages"][-1]["content"] == FINAL_REQUEST


def test_no_budget_no_notes(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(tool_calls=[{"name": "echo", "arguments": {}}]),
                           Reply(text="done"))
    run = orch.run_leg("m", "go", plugins=[("echo", Echo())])
    assert all(b["messages"][-1]["content"] not in NOTE.values() for b in run.bodies)
    assert "turn_budget" not in run.leg and "finished" not in run.leg
    assert run.doc["exit_code"] == 0
