"""The doom_loop plugin on the wire: a leg that repeats a tool call loses its tools, and the
request that goes out without them says what was repeated."""

from __future__ import annotations

import json

import pytest
from orch_plugins import doom_loop

from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

ANSWER = "a.py defines main()"


class Workspace:
    """read and grep tools that count their runs."""

    def __init__(self) -> None:
        self.runs = 0

    @hookimpl
    def register_tools(self, leg):
        def run(**kwargs):
            self.runs += 1
            return f"result {self.runs}"

        return [
            Tool("read", "Read a file.", {"type": "object", "properties": {
                "path": {"type": "string"}, "limit": {"type": "integer"}}}, run),
            Tool("grep", "Search.", {"type": "object", "properties": {
                "pattern": {"type": "string"}}}, run),
        ]


def looping(*calls: tuple[str, str]):
    """A model that cycles through ``calls`` while it has tools, and answers once it has none."""

    def reply(body, n):
        if not body.get("tools"):
            return Reply(text=ANSWER)
        name, arguments = calls[n % len(calls)]
        return Reply(tool_calls=[{"name": name, "arguments": arguments}])

    return reply


def has_tools(body: dict) -> bool:
    return bool(body.get("tools"))


def test_a_repeated_call_is_cut_off_after_three_and_the_next_request_has_no_tools(
        orch, scripted_server):
    ws = Workspace()
    scripted_server.script("m", looping(("read", '{"path": "a.py"}')))
    run = orch.run_leg("m", "What is in a.py?", plugins=[("ws", ws)])
    assert scripted_server.count("m") == 4
    assert [has_tools(b) for b in run.bodies] == [True, True, True, False]
    note = run.bodies[3]["messages"][-1]
    assert note["role"] == "user"
    assert "same call 3 times in a row" in note["content"] and 'read {"path":"a.py"}' in (
        note["content"])
    assert ws.runs == 3
    leg = run.leg
    assert leg["doom_loop"] == {"tool": "read", "count": 3, "step": 3, "pattern": "repeat"}
    assert leg["status"] == "complete" and leg["answer"] == ANSWER
    assert any(n.startswith("doom loop: read called 3 times") for n in leg["notes"])


def test_key_order_and_spacing_do_not_make_a_call_different(orch, scripted_server):
    scripted_server.script("m", looping(("read", '{"path": "a.py", "limit": 5}'),
                                        ("read", '{"limit":5,"path":"a.py"}'),
                                        ("read", '{ "limit": 5 ,  "path": "a.py" }')))
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert scripted_server.count("m") == 4 and run.leg["doom_loop"]["count"] == 3


def test_different_arguments_are_not_a_loop(orch, scripted_server):
    scripted_server.script("m", *[Reply(tool_calls=[{"name": "read",
                                                     "arguments": {"path": f"{c}.py"}}])
                                  for c in "abcde"], Reply(text=ANSWER))
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert scripted_server.count("m") == 6 and all(has_tools(b) for b in run.bodies)
    assert "doom_loop" not in run.leg and run.leg["answer"] == ANSWER


def test_two_calls_in_turn_are_a_loop_too(orch, scripted_server):
    scripted_server.script("m", looping(("read", '{"path": "a.py"}'),
                                        ("grep", '{"pattern": "main"}')))
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert [has_tools(b) for b in run.bodies] == [True, True, True, True, False]
    assert "alternating between read" in run.bodies[4]["messages"][-1]["content"]
    assert run.leg["doom_loop"] == {"tool": "read ↔ grep", "count": 4, "step": 4,
                                    "pattern": "cycle"}


def test_the_minimal_tier_is_cut_off_after_two(orch, scripted_server):
    orch.provider()
    orch.config(plugin_config={"tiers": {"models": {"scripted/m": "minimal"}}})
    scripted_server.script("m", looping(("read", '{"path": "a.py"}')))
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert run.leg["tier"] == "minimal"  # decided by the tiers plugin
    assert [has_tools(b) for b in run.bodies] == [True, True, False]
    assert run.leg["doom_loop"]["count"] == 2


def test_the_threshold_comes_from_plugin_config(orch, scripted_server):
    orch.provider()
    orch.config(plugin_config={"doom_loop": {"repeats": 5}})
    scripted_server.script("m", looping(("read", '{"path": "a.py"}')))
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert scripted_server.count("m") == 6 and run.leg["doom_loop"]["count"] == 5


def test_a_bad_threshold_is_a_one_line_config_error_before_any_request(orch, scripted_server):
    orch.provider()
    orch.config(plugin_config={"doom_loop": {"repeats": 1}})
    run = orch.run_leg("m", plugins=[("ws", Workspace())])
    assert scripted_server.count("m") == 0
    assert run.leg["status"] == "error"
    assert run.leg["reason"] == ("config: plugin_config.doom_loop.repeats is 1; set it to a "
                                 "whole number of at least 2 in config.json")


def test_without_the_plugin_the_loop_runs_to_the_step_limit(orch, scripted_server,
                                                            monkeypatch):
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "doom_loop")
    scripted_server.script("m", looping(("read", '{"path": "a.py"}')))
    run = orch.run_leg("m", plugins=[("ws", Workspace())], max_steps=8)
    assert scripted_server.count("m") == 8 and run.leg["stopped"] == "max_steps"
    assert "doom_loop" not in run.leg


def test_orch_fanout_shows_the_note_with_the_answer(orch, scripted_server, tmp_path):
    """The real CLI with the real workspace tools: the model reads a.py over and over."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider()
    (tmp_path / "a.py").write_text("def main():\n    pass\n")
    scripted_server.script("m", looping(("read", '{"path": "a.py"}')))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "What is in a.py?",
                                      "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ANSWER in result.stdout and "doom loop" not in result.stdout
    assert ("doom loop: read called 3 times in a row with the same arguments (step 3); "
            "tools withheld for the next request") in result.stderr
    bodies = [r.body for r in scripted_server.requests_for("m")]
    assert [has_tools(b) for b in bodies] == [True, True, True, False]
    assert "def main():" in bodies[1]["messages"][-1]["content"]  # the real read ran


# -- after the tools come back -------------------------------------------------------------------
# The engine ends a leg on the answer to a tool-less request, so tools coming back cannot be
# driven over the wire today; the hooks are exercised directly, on a real LegContext.

def _leg(orch_home):
    from orchestrator.config import Config
    from orchestrator.engine.context import LegContext
    from orchestrator.engine.record import LegRecord
    from orchestrator.models.addressing import ResolvedModel

    model = ResolvedModel(name="p/m", provider="p", litellm_model="openai/m")
    return LegContext(leg_id="w-1", wave_id="w", model=model, briefing="b",
                      record=LegRecord(leg_id="w-1", wave_id="w", model="p/m", provider="p"),
                      config=Config.load(), dir=orch_home)


def _step(leg, n, tools, calls):
    from orchestrator.request import Request, Response, ToolCall

    leg.step = n
    request = Request(model="p/m", messages=[{"role": "user", "content": "q"}], tools=tools,
                      step=n)
    request = doom_loop.before_request(leg, request) or request
    response = Response(tool_calls=tuple(ToolCall(f"c{n}", name, args) for name, args in calls))
    doom_loop.step_end(leg, {"step": n, "request": request, "response": response,
                             "tool_results": []})
    return request


def test_a_leg_that_loops_again_after_its_tools_come_back_does_not_get_them_back(orch_home):
    leg, tools, call = _leg(orch_home), [{"type": "function"}], [("read", '{"path": "a"}')]
    sent = [_step(leg, n, tools, call) for n in (1, 2, 3)]
    assert all(r.tools for r in sent)
    assert _step(leg, 4, tools, []).tools is None  # the first loop: one request without tools
    assert _step(leg, 5, tools, [("grep", "{}")]).tools == tools  # ... then they come back
    assert _step(leg, 6, tools, call).tools == tools
    assert _step(leg, 7, tools, call).tools == tools
    assert leg.record.extra["doom_loop"] == {"tool": "read", "count": 3, "step": 3,
                                             "pattern": "repeat"}
    _step(leg, 8, tools, call)
    assert leg.record.extra["doom_loop"] == {"tool": "read", "count": 3, "step": 8,
                                             "pattern": "repeat", "trips": 2}  # again ...
    later = [_step(leg, n, tools, [("grep", json.dumps({"p": n}))]) for n in (9, 10, 11)]
    assert all(r.tools is None for r in later)  # ... and the tools are gone for good
    assert "tools withheld for the rest of the leg" in leg.record.notes[-1]


@pytest.mark.parametrize("history, repeats, expected", [
    (["A", "A", "A"], 3, ("repeat", 3)),
    (["B", "A", "A"], 3, None),
    (["A", "A", "A", "A"], 3, ("repeat", 4)),
    (["A", "B", "A", "B"], 3, ("cycle", 4)),
    (["A", "B", "A", "C"], 3, None),
    (["A", None, "A", None], 3, None),
    (["A", "A"], 2, ("repeat", 2)),
    ([], 3, None),
])
def test_detect(history, repeats, expected):
    history = [((h, "{}"),) if h else None for h in history]
    found = doom_loop.detect(history, repeats, 2)
    assert (found and (found["pattern"], found["count"])) == (expected or None)
