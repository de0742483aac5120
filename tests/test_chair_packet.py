"""The fanout chair is told which answers were cut (OUTPUT_LENGTH, text kept) and which a budget
stopped before they finished, in that answer's header, as the council marks a CUT review."""

from __future__ import annotations

from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


class Echo:
    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda **kw: "e")]


def spender(body, n):
    """Calls a tool until asked without tools; each step spends 300 tokens of the budget."""
    usage = {"prompt_tokens": 250, "completion_tokens": 50}
    if not body.get("tools"):
        return Reply(text="Partial: looked at two files.", usage=usage)
    return Reply(tool_calls=[{"name": "echo", "arguments": {}}], usage=usage)


def test_cut_and_unfinished_answers_are_marked_in_the_chair_packet(orch, scripted_server):
    orch.provider()
    scripted_server.script("cut", Reply(text="The first half of a long answ",
                                        finish_reason="length"))
    scripted_server.script("stopped", spender)
    scripted_server.script("whole", Reply(text="A whole answer."))
    scripted_server.script("judge", Reply(text="Synthesis."))
    run = orch.run_wave(["cut", "stopped", "whole"], "Why?", chair="judge",
                        plugins=[("echo", Echo())], options={"leg_tokens": 1000})
    legs = {leg["model"]: leg for leg in run.legs}
    assert legs["scripted/cut"]["truncated"] is True
    assert legs["scripted/stopped"]["finished"] is False
    packet = scripted_server.requests_for("judge")[0].body["messages"][-1]["content"]
    heads = {line.split(" (")[0][4:]: line.rsplit(" [", 1)[0] for line in packet.splitlines()
             if line.startswith("### ")}
    assert "CUT: stopped at its output limit (OUTPUT_LENGTH)" in heads["scripted/cut"]
    assert "UNFINISHED: stopped on budget before finishing" in heads["scripted/stopped"]
    assert "CUT" not in heads["scripted/whole"] and "UNFINISHED" not in heads["scripted/whole"]
    assert heads["scripted/whole"] == f"### scripted/whole ({legs['scripted/whole']['leg_id']})"
    assert "The first half of a long answ" in packet and "Partial: looked at" in packet
