"""The exploration nudge on the wire: after 12 read-only steps in a row with no answer, a note
at the end of the conversation asks for the answer or what is missing, every 12 such steps."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from orch_plugins.exploration import NOTE

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(40):
        (root / f"f{i}.txt").write_text(f"file {i}\n")
    return root


def reader(answer_after: int):
    """Reads a new file each step (never a repeat: the doom-loop guard stays quiet)."""
    def reply(body, n):
        if n > answer_after:
            return Reply(text="the answer")
        return Reply(tool_calls=[{"name": "read", "arguments": {"path": f"f{n}.txt"},
                                  "id": f"r{n}"}])
    return reply


def last_user(body) -> str | None:
    last = body["messages"][-1]
    return last["content"] if last["role"] == "user" else None


def test_a_note_after_12_read_only_steps_then_every_12(orch, scripted_server, ws):
    orch.provider()
    scripted_server.script("m", reader(26))
    run = orch.run_leg("m", "Where is it?", workspace=ws, max_steps=40)
    assert run.leg["status"] == "complete" and run.leg["answer"] == "the answer"
    noted = {i + 1: last_user(b) for i, b in enumerate(run.bodies)}
    assert [i for i, text in noted.items() if text and text.startswith("Exploration note")] \
        == [13, 25]
    assert noted[13] == NOTE.format(n=12) and noted[25] == NOTE.format(n=24)
    assert all(b.get("tools") for b in run.bodies)  # a nudge: tools stay on
    assert run.leg["exploration"] == {"every": 12, "notes": [
        {"step": 13, "read_only_steps": 12}, {"step": 25, "read_only_steps": 24}]}
    assert [n for n in run.leg["notes"] if n.startswith("exploration:")] == [
        "exploration: 12 read-only tool steps in a row with no answer; note appended at step 13",
        "exploration: 24 read-only tool steps in a row with no answer; note appended at step 25"]


def test_eleven_reads_say_nothing_and_another_tool_restarts_the_count(orch, scripted_server,
                                                                       ws):
    class Write:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("write", "Write.", {"type": "object", "properties": {}},
                         lambda **kw: "ok")]

    def reply(body, n):
        if n == 8:  # a call that is not read-only, mid-way
            return Reply(tool_calls=[{"name": "write", "arguments": {}, "id": "w"}])
        if n > 19:
            return Reply(text="done")
        return Reply(tool_calls=[{"name": "read", "arguments": {"path": f"f{n}.txt"},
                                  "id": f"r{n}"}])

    orch.provider()
    scripted_server.script("m", reply)
    run = orch.run_leg("m", "go", workspace=ws, max_steps=40, plugins=[("write", Write())])
    assert run.leg["status"] == "complete"
    assert "exploration" not in run.leg  # 7 reads, a write, 11 reads: never 12 in a row


def test_the_minimal_tier_and_config_set_the_count(orch, scripted_server, ws):
    orch.provider()
    orch.config(plugin_config={"exploration": {"steps": 5}})
    scripted_server.script("m", reader(7))
    run = orch.run_leg("m", "go", workspace=ws, max_steps=40)
    assert run.leg["exploration"]["notes"] == [{"step": 6, "read_only_steps": 5}]
    orch.config(plugin_config={"exploration": {"steps": 0}})
    scripted_server.script("m", reader(7))
    run = orch.run_leg("m", "go", workspace=ws, max_steps=40)
    assert "exploration" not in run.leg and len(run.bodies) == 9  # 8 reads, an answer
    orch.config(plugin_config={"exploration": {"steps": 12, "steps_minimal": 3},
                               "tiers": {"models": {"scripted/m": "minimal"}}})
    scripted_server.script("m", reader(7))
    run = orch.run_leg("m", "go", workspace=ws, max_steps=40)
    assert run.leg["tier"] == "minimal"
    assert run.leg["exploration"]["notes"][0] == {"step": 4, "read_only_steps": 3}


def test_a_bad_setting_is_one_line(orch, scripted_server, ws):
    orch.provider()
    orch.config(plugin_config={"exploration": {"steps": -1}})
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "go",
                                      "--workspace", str(ws)])
    assert "plugin_config.exploration.steps must be at least 0, not -1" in result.output
    assert "Traceback" not in result.output
