"""The text tool protocol reaches a model with no system role: with placement 'user' (auto
for the embedded base model) it opens the first user message with one worked call, and a call
the model writes is executed."""

from __future__ import annotations

from orch_plugins.text_tools import TEXT_PROTOCOL_HEAD, as_text

from orchestrator.testing.scripted_server import Reply

READ = {"type": "function", "function": {"name": "read", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}}


def test_user_placement_opens_the_first_user_message_with_an_example():
    out = as_text([{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "What is in notes.txt?"}], [READ],
                  placement="user", example=True)
    assert out[0] == {"role": "system", "content": "Be brief."}  # untouched (dropped later)
    first = out[1]["content"]
    assert first.startswith(TEXT_PROTOCOL_HEAD) and first.endswith("What is in notes.txt?")
    assert '<tool_call>{"name": "read", "arguments": {"path": "README.md"}}</tool_call>' in first
    again = as_text(out, [READ], placement="user", example=True)
    assert again[1]["content"].count(TEXT_PROTOCOL_HEAD) == 1  # once


def test_a_text_call_is_executed_with_user_placement(orch, scripted_server, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("the answer is 42\n")
    orch.provider(supports_tools=False)
    orch.config(plugin_config={"text_tools": {"placement": "user"}})
    scripted_server.script("m", Reply(
        text='<tool_call>{"name": "read", "arguments": {"path": "notes.txt"}}</tool_call>'),
        Reply(text="It says 42."))
    run = orch.run_leg("m", "What is in notes.txt?", workspace=ws)
    assert run.leg["status"] == "complete" and run.leg["answer"] == "It says 42."
    first = run.bodies[0]
    assert "tools" not in first
    user = [m for m in first["messages"] if m["role"] == "user"][0]["content"]
    assert user.startswith(TEXT_PROTOCOL_HEAD) and "<tool_call>" in user
    assert not any(TEXT_PROTOCOL_HEAD in (m.get("content") or "")
                   for m in first["messages"] if m["role"] == "system")
    result = run.bodies[1]["messages"][-1]["content"]
    assert "the answer is 42" in result
