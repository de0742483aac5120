"""The text_tools plugin on the wire: tool calls a model wrote as text run as real calls when
the model has no native tool calling (or is on the minimal tier); other JSON stays text."""

from __future__ import annotations

import pytest
from orch_plugins.text_tools import lift

from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"},
                                           "limit": {"type": "integer"}}, "required": ["path"]}
TAGGED = 'Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.py"}}\n</tool_call>'


class Files:
    """A read tool that remembers what it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    @hookimpl
    def register_tools(self, leg):
        def read(**kwargs):
            self.calls.append(kwargs)
            return f"contents of {kwargs['path']}"

        return [Tool("read", "Read a file.", SCHEMA, read)]


def run_text(orch, scripted_server, text: str, *, config: dict | None = None, **provider):
    orch.provider(**provider)
    if config:
        orch.config(plugin_config=config)
    files = Files()
    scripted_server.script("m", Reply(text=text), Reply(text="a.py holds main()"))
    return orch.run_leg("m", "What is in a.py?", plugins=[("files", files)]), files


def test_a_tagged_call_from_a_model_without_native_tools_runs(orch, scripted_server):
    run, files = run_text(orch, scripted_server, TAGGED, supports_tools=False)
    assert files.calls == [{"path": "a.py"}]
    assert scripted_server.count("m") == 2
    history = run.bodies[1]["messages"]
    assert history[-1] == {"role": "tool", "tool_call_id": "call_text_1_0",
                           "content": "contents of a.py"}
    assert history[-2]["content"] == "Let me look."  # the call left the text
    assert history[-2]["tool_calls"][0]["function"]["name"] == "read"
    assert run.leg["answer"] == "a.py holds main()"
    assert run.leg["text_tool_calls"] == {"lifted": 1, "why": "no native tool calling"}


def test_a_model_with_native_tools_keeps_its_text(orch, scripted_server):
    run, files = run_text(orch, scripted_server, TAGGED)  # supports_tools unknown: not lifted
    assert files.calls == [] and scripted_server.count("m") == 1
    assert run.leg["answer"] == TAGGED and "text_tool_calls" not in run.leg


def test_the_minimal_tier_lifts_a_fenced_block(orch, scripted_server):
    text = 'I will read it.\n```json\n{"name": "read", "arguments": {"path": "a.py"}}\n```\n'
    run, files = run_text(orch, scripted_server, text,
                          config={"tiers": {"models": {"scripted/m": "minimal"}}})
    assert run.leg["tier"] == "minimal"
    assert files.calls == [{"path": "a.py"}]
    assert run.leg["text_tool_calls"] == {"lifted": 1, "why": "minimal tier"}
    assert run.bodies[1]["messages"][-2]["content"] == "I will read it."


def test_a_bare_object_is_lifted_when_config_says_always(orch, scripted_server):
    text = 'Reading now: {"tool": "read", "parameters": {"path": "a.py", "limit": 3}} ok'
    run, files = run_text(orch, scripted_server, text, config={"text_tools": {"lift": "always"}})
    assert files.calls == [{"path": "a.py", "limit": 3}]
    assert run.bodies[1]["messages"][-2]["content"] == "Reading now:  ok"


def test_lifted_arguments_are_mended_by_json_repair(orch, scripted_server):
    text = "<tool_call>{\"name\": \"read\", \"arguments\": \"{'Path': 'a.py', 'limit': '2',}\"}"
    run, files = run_text(orch, scripted_server, text, supports_tools=False)
    assert files.calls == [{"path": "a.py", "limit": 2}]  # unclosed tag, broken JSON: mended
    assert run.leg["json_repairs"] == 1


@pytest.mark.parametrize("text", [
    'A user record looks like this:\n```json\n{"name": "Ada", "arguments": {"age": 36}}\n```',
    'Send {"path": "a.py"} to the endpoint.',
    'JSON Schema: {"type": "object", "properties": {"name": {"type": "string"}}}',
    'To read, a model writes {"name": "read"} — without arguments it is only a mention.',
    '```python\nread({"path": "a.py"})\n```',
])
def test_json_that_names_no_roster_tool_stays_text(orch, scripted_server, text):
    run, files = run_text(orch, scripted_server, text, config={"text_tools": {"lift": "always"}})
    assert files.calls == [] and scripted_server.count("m") == 1
    assert run.leg["answer"] == text and "text_tool_calls" not in run.leg


def test_never_turns_lifting_off_even_without_native_tools(orch, scripted_server):
    run, files = run_text(orch, scripted_server, TAGGED, supports_tools=False,
                          config={"text_tools": {"lift": "never"}})
    assert files.calls == [] and run.leg["answer"] == TAGGED


def test_a_bad_lift_setting_is_a_one_line_config_error(orch, scripted_server):
    run, _ = run_text(orch, scripted_server, TAGGED, config={"text_tools": {"lift": "yes"}})
    assert scripted_server.count("m") == 0  # refused before anything was spent
    assert run.leg["status"] == "error"
    assert run.leg["reason"] == ("config: plugin_config.text_tools.lift is 'yes'; set it to one "
                                 "of auto, always, never in config.json")


def test_orch_fanout_runs_a_text_call_with_the_workspace_tools(orch, scripted_server, tmp_path):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider(supports_tools=False)
    (tmp_path / "a.py").write_text("def main():\n    pass\n")
    scripted_server.script("m", Reply(text=TAGGED), Reply(text="a.py holds main()"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "What is in a.py?",
                                      "--workspace", str(tmp_path), "-q", "--json"])
    assert result.exit_code == 0, result.output
    second = scripted_server.requests_for("m")[1].body["messages"]
    assert second[-1]["role"] == "tool" and "def main():" in second[-1]["content"]


ROSTER = {"read": None, "grep": None}


@pytest.mark.parametrize("text, calls, rest", [
    ("<tool_call>[{\"name\": \"read\", \"arguments\": {\"path\": \"a\"}}, "
     "{\"name\": \"grep\", \"arguments\": {\"pattern\": \"x\"}}]</tool_call>",
     [("read", '{"path": "a"}'), ("grep", '{"pattern": "x"}')], ""),
    ("<tool_call>{\"name\": \"grep\"}</tool_call> then", [("grep", "{}")], "then"),
    ('{"type": "function", "function": {"name": "read", "arguments": "{\\"path\\": \\"a\\"}"}}',
     [("read", '{"path": "a"}')], ""),
    ("{'name': 'read', 'arguments': {'path': 'a'}", [("read", '{"path": "a"}')], ""),
    ('<tool_call>{"name": "write", "arguments": {}}</tool_call>', [],
     '<tool_call>{"name": "write", "arguments": {}}</tool_call>'),
    ('```json\n[{"name": "read", "arguments": {}}, {"name": "x", "arguments": {}}]\n```', [],
     '```json\n[{"name": "read", "arguments": {}}, {"name": "x", "arguments": {}}]\n```'),
    ('{"config": {"name": "read", "arguments": {}}}', [],
     '{"config": {"name": "read", "arguments": {}}}'),
])
def test_lift(text, calls, rest):
    assert lift(text, ROSTER) == (calls, rest)
