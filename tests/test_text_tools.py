"""The text_tools plugin on the wire: tool calls a model wrote as text run as real calls when
the model has no native tool calling (or is on the minimal tier); other JSON stays text."""

from __future__ import annotations

import pytest
from orch_plugins.text_tools import TEXT_PROTOCOL_HEAD, lift

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


def test_a_model_without_native_tools_gets_the_text_protocol_on_the_wire(orch, scripted_server):
    run, files = run_text(orch, scripted_server, TAGGED, supports_tools=False)
    assert files.calls == [{"path": "a.py"}]
    assert scripted_server.count("m") == 2
    for body in run.bodies:  # never sent tools; told the tools and the format instead
        assert "tools" not in body and "tool_choice" not in body
        system = body["messages"][0]
        assert system["role"] == "system" and system["content"].count(TEXT_PROTOCOL_HEAD) == 1
        assert '<tool_call>{"name": "TOOL_NAME", "arguments"' in system["content"]
        assert '- read: Read a file. Arguments: {"type":"object"' in system["content"]
    history = run.bodies[1]["messages"]
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in history)
    assert history[-2] == {"role": "assistant", "content": 'Let me look.\n<tool_call>{"name": '
                           '"read", "arguments": {"path": "a.py"}}</tool_call>'}
    assert history[-1] == {"role": "user",
                           "content": "Result of read (call_text_1_0):\ncontents of a.py"}
    assert run.leg["answer"] == "a.py holds main()"
    assert run.leg["text_tool_calls"] == {"lifted": 1, "why": "no native tool calling"}
    assert run.leg["tool_format"] == "text"
    logged = [e for e in run.conversation() if e["type"] == "request"]
    assert [e["tool_format"] for e in logged] == ["text", "text"]


def test_an_endpoint_that_rejects_tools_is_learned_and_the_leg_retried_in_text(
        orch, scripted_server, orch_home):
    import json

    orch.provider()  # supports_tools not declared: tools are sent at first
    files = Files()
    scripted_server.script(
        "m", Reply(status=400, error_message="this model does not support tools"),
        Reply(text=TAGGED), Reply(text="a.py holds main()"))
    run = orch.run_leg("m", "What is in a.py?", plugins=[("files", files)])
    bodies = run.bodies
    assert len(bodies) == 3 and "tools" in bodies[0]
    assert "tools" not in bodies[1] and "tools" not in bodies[2]
    assert TEXT_PROTOCOL_HEAD in bodies[1]["messages"][0]["content"]
    assert files.calls == [{"path": "a.py"}]
    leg = run.leg
    assert leg["status"] == "complete" and leg["answer"] == "a.py holds main()"
    assert leg["tools_rejected"] == "this model does not support tools"
    assert leg["requests"] == 3
    learned = json.loads((orch_home / "catalog.json").read_text())["models"]
    assert learned["scripted/m"]["supports_tools"] is False
    # the next leg of that model goes straight to text: no rejected request
    scripted_server.script("m", Reply(text="plain answer"))
    again = orch.run_leg("m", "Anything?", plugins=[("files", Files())])
    assert len(again.bodies) == 1 and "tools" not in again.bodies[0]
    assert again.leg["tool_format"] == "text" and "tools_rejected" not in again.leg


def test_a_second_rejection_or_another_400_ends_the_leg(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=400, error_message="bad temperature"))
    run = orch.run_leg("m", "x", plugins=[("files", Files())])
    assert run.leg["status"] == "error" and len(run.bodies) == 1
    assert "tools_rejected" not in run.leg


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
    first, second = (r.body for r in scripted_server.requests_for("m"))
    assert "tools" not in first and "tools" not in second  # fanout legs: the text protocol
    assert "- read:" in first["messages"][0]["content"]
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith("Result of read (call_text_1_0):")
    assert "def main():" in second["messages"][-1]["content"]


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


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"models": ["x"]}',
                                     '{"models": {"scripted/m": "yes"}}'])
def test_a_damaged_catalog_file_is_ignored(orch, scripted_server, orch_home, content):
    (orch_home / "catalog.json").write_text(content)
    run, files = run_text(orch, scripted_server, TAGGED)
    assert run.leg["status"] == "complete" and "tools" in run.bodies[0]


def test_an_unwritable_catalog_still_retries_the_leg_in_text(orch, scripted_server, orch_home):
    (orch_home / "catalog.json").mkdir()  # cannot be replaced by a file
    orch.provider()
    scripted_server.script(
        "m", Reply(status=400, error_message="model does not support tools"),
        Reply(text="plain answer"))
    run = orch.run_leg("m", "x", plugins=[("files", Files())])
    assert run.leg["status"] == "complete" and run.leg["tool_format"] == "text"
    assert "tools" not in run.bodies[1]
