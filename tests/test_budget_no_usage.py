"""A turn budget on an endpoint that reports no usage: each step is estimated, the record says
``estimated``, one Note says so, and ``--leg-tokens`` trips (it never tripped: 0 tokens)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from orch_plugins.turn_budget import FINAL_REQUEST

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


class Echo:
    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {"i": {"type": "integer"}}},
                     lambda **kw: "echoed " * 40)]


def silent(body, n):
    """Explores forever and never reports usage; answers once asked without tools."""
    if not body.get("tools"):
        return Reply(text="Found: half of it.", no_usage=True)
    return Reply(tool_calls=[{"name": "echo", "arguments": {"i": n}}], no_usage=True)


def test_a_silent_endpoint_is_estimated_and_the_budget_trips(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", silent)
    run = orch.run_leg("m", "find the bug", plugins=[("echo", Echo())], max_steps=40,
                       options={"leg_tokens": 3000})
    leg = run.leg
    assert leg["status"] == "complete" and leg["stopped"] == "budget"
    assert leg["finished"] is False and leg["answer"] == "Found: half of it."
    assert len(run.bodies) < 40 and run.bodies[-1]["messages"][-1]["content"] == FINAL_REQUEST
    record = leg["turn_budget"]
    assert record["estimated"] is True and record["used_tokens"] > 2000
    said = [n for n in leg["notes"] if n.startswith("turn budget:") and "no usage" in n]
    assert said == ["turn budget: scripted/m reported no usage; its spend is estimated from the "
                    "sizes of the requests and answers (marked estimated)"]


def test_a_reporting_endpoint_is_never_marked_estimated(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", lambda body, n: Reply(
        text="done" if n > 3 else "",
        tool_calls=None if n > 3 else [{"name": "echo", "arguments": {"i": n}}]))
    run = orch.run_leg("m", "go", plugins=[("echo", Echo())], options={"leg_tokens": 100000})
    assert "estimated" not in run.leg["turn_budget"]
    assert not [n for n in run.leg["notes"] if "reported no usage" in n]


def test_leg_tokens_trips_through_the_cli_on_a_silent_endpoint(orch, scripted_server,
                                                               tmp_path):
    orch.provider()
    scripted_server.script("m", silent)
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "go " * 200,
                                      "--leg-tokens", "2000", "--tools", "none", "--json"])
    # no tools at all: one answer, estimated, no budget trip needed; the record says so
    doc = json.loads(result.stdout)
    assert doc["legs"][0]["turn_budget"]["estimated"] is True
    assert doc["legs"][0]["turn_budget"]["used_tokens"] > 100
