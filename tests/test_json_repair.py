"""The json_repair plugin on the wire: broken tool-call arguments are mended before the tool
runs, what cannot be mended reaches the model as a tool error, and the leg goes on."""

from __future__ import annotations

import json

import pytest
from orch_plugins.json_repair import mend

from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

READ_SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"},
                   "mode": {"enum": ["text", "bytes"]}, "follow": {"type": "boolean"}},
    "required": ["file_path"],
    "additionalProperties": False,
}


class Reader:
    """A read_file tool that remembers exactly what it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    @hookimpl
    def register_tools(self, leg):
        def read_file(**kwargs):
            self.calls.append(kwargs)
            return f"read {kwargs['file_path']} limit={kwargs.get('limit')!r}"

        return [Tool("read_file", "Read a file.", READ_SCHEMA, read_file)]


def tool_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "tool"]


def run_with(orch, scripted_server, arguments: str, *, name: str = "read_file"):
    reader = Reader()
    scripted_server.script("m", Reply(tool_calls=[{"name": name, "arguments": arguments}]),
                           Reply(text="done"))
    run = orch.run_leg("m", "Read a.py", plugins=[("reader", reader)])
    return run, reader


def test_malformed_arguments_are_repaired_and_the_tool_runs(orch, scripted_server):
    run, reader = run_with(orch, scripted_server, "{'filePath': 'a.py', 'limit': '5',}")
    assert reader.calls == [{"file_path": "a.py", "limit": 5}]
    second = run.bodies[1]
    # the tool's result reached the model, and its call now reads as valid JSON
    assert tool_messages(second)[-1]["content"] == "read a.py limit=5"
    sent = second["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"file_path": "a.py", "limit": 5}
    assert run.leg["status"] == "complete" and run.leg["answer"] == "done"
    assert run.leg["json_repairs"] == 1
    assert run.leg["json_repair_kinds"] == {"coerced": 1, "key_case": 1, "syntax": 1}


def test_an_unrepairable_call_becomes_a_tool_error_and_the_leg_completes(orch, scripted_server):
    run, reader = run_with(orch, scripted_server, '{"limit": "lots"}')
    assert reader.calls == []  # the tool never ran
    error = tool_messages(run.bodies[1])[-1]["content"]
    assert error.startswith("error: bad arguments for read_file: ")
    assert "'file_path' is a required property" in error
    assert "'lots' is not of type 'integer'" in error
    assert "file_path: string (required)" in error  # what to send instead
    assert run.leg["status"] == "complete" and run.leg["answer"] == "done"
    assert run.leg["json_repair_kinds"] == {"rejected": 1}
    assert "json_repairs" not in run.leg


def test_valid_arguments_go_through_byte_for_byte(orch, scripted_server):
    raw = '{ "file_path" :"a.py",  "limit": 3 }'
    run, reader = run_with(orch, scripted_server, raw)
    assert reader.calls == [{"file_path": "a.py", "limit": 3}]
    assert run.bodies[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == raw
    assert "json_repairs" not in run.leg and "json_repair_kinds" not in run.leg


def test_a_tool_name_in_another_case_style_is_mended(orch, scripted_server):
    run, reader = run_with(orch, scripted_server, '{"file_path": "a.py"}', name="ReadFile")
    assert reader.calls == [{"file_path": "a.py"}]
    assert run.bodies[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert run.leg["json_repair_kinds"] == {"tool_name": 1}


def test_calls_another_plugin_adds_are_mended_too(orch, scripted_server):
    """json_repair wraps the after_response pipeline: it sees the calls the pipeline ends with,
    whichever plugin (and in whatever order) put them there."""
    from orchestrator.request import ToolCall

    class Planner:
        @hookimpl
        def after_response(self, leg, request, response):
            if request.step == 1:
                return response.evolve(tool_calls=(
                    ToolCall("p1", "read_file", "{filePath: 'b.py'"),))

    reader = Reader()
    scripted_server.script("m", Reply(text="thinking"), Reply(text="done"))
    run = orch.run_leg("m", plugins=[("reader", reader), ("planner", Planner())])
    assert reader.calls == [{"file_path": "b.py"}]
    assert tool_messages(run.bodies[1])[-1]["content"] == "read b.py limit=None"


def test_without_the_plugin_the_engine_only_reports_bad_json(orch, scripted_server,
                                                             monkeypatch):
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "json_repair")
    run, reader = run_with(orch, scripted_server, "{'filePath': 'a.py',}")
    assert reader.calls == []
    assert tool_messages(run.bodies[1])[-1]["content"].startswith(
        "error: the arguments are not valid JSON")
    assert "json_repairs" not in run.leg


@pytest.mark.parametrize("raw", [
    '{“file_path”: “a.py”}',  # smart double quotes
    "{‘file_path’: ‘a.py’}",  # smart single quotes
    "{'file_path': 'a.py'}",  # single quotes
    '{"file_path": "a.py",}',  # trailing comma
    '{"file_path": "a.py" // the file\n}',  # line comment
    '{"file_path": /* which */ "a.py"}',  # block comment
    '{"file_path": "a.py"',  # unbalanced brace
    '{"file_path": "a.py"}}',  # one brace too many
    '{"filePath": "a.py"}',  # camelCase key
    '{"file-path": "a.py"}',  # kebab-case key
    '{"FILE_PATH": "a.py"}',  # shouting key
    '"{\\"file_path\\": \\"a.py\\"}"',  # the object sent as a JSON string
    '{file_path: a.py}',  # no quotes at all
])
def test_each_kind_of_breakage_is_mended(raw):
    mended = mend(raw, READ_SCHEMA)
    assert mended.error is None and mended.fixes
    assert json.loads(mended.text) == {"file_path": "a.py"}


@pytest.mark.parametrize("value, schema_type, expected", [
    ("5", "integer", 5), (" -3 ", "integer", -3), (4.0, "integer", 4), ("2.5", "number", 2.5),
    ("7", "number", 7), ("true", "boolean", True), ("False", "boolean", False),
    (12, "string", "12"), ('{"a": 1}', "object", {"a": 1}), ("[1, 2]", "array", [1, 2]),
])
def test_values_are_coerced_where_the_schema_is_unambiguous(value, schema_type, expected):
    schema = {"type": "object", "properties": {"v": {"type": schema_type}}}
    mended = mend(json.dumps({"v": value}), schema)
    assert mended.error is None and mended.fixes == ("coerced",)
    assert json.loads(mended.text) == {"v": expected}


@pytest.mark.parametrize("value, prop", [
    ("5", {"type": ["string", "integer"]}),  # two readings: left alone, and it fits
    ("yes", {"type": "boolean"}),  # "yes" is not unambiguously true
    ("1", {"type": "boolean"}),
    ("5.5", {"type": "integer"}),
    (5.5, {"type": "integer"}),
    (True, {"type": "string"}),
    ("five", {"type": "number"}),
    ("Tex", {"enum": ["text", "bytes"]}),
])
def test_ambiguous_values_are_not_coerced(value, prop):
    raw = json.dumps({"v": value})
    mended = mend(raw, {"type": "object", "properties": {"v": prop}})
    assert mended.fixes == () and mended.text == raw
    assert (mended.error is None) == (prop == {"type": ["string", "integer"]})


def test_an_enum_value_in_another_case_is_mended():
    mended = mend('{"file_path": "a", "mode": "TEXT"}', READ_SCHEMA)
    assert json.loads(mended.text)["mode"] == "text" and mended.fixes == ("coerced",)


def test_a_key_that_matches_two_properties_is_left_alone():
    schema = {"type": "object", "properties": {"file_path": {}, "filePath": {}}}
    mended = mend('{"FILE-PATH": 1}', schema)
    assert mended.fixes == () and mended.text == '{"FILE-PATH": 1}'


def test_nested_objects_and_arrays_are_fitted_too():
    schema = {"type": "object", "properties": {"edits": {"type": "array", "items": {
        "type": "object", "properties": {"line_no": {"type": "integer"}},
        "required": ["line_no"]}}}}
    mended = mend("{'edits': [{'lineNo': '3'}, {'line-no': 4}]}", schema)
    assert mended.error is None
    assert json.loads(mended.text) == {"edits": [{"line_no": 3}, {"line_no": 4}]}


def test_a_broken_tool_schema_is_not_held_against_the_model():
    mended = mend('{"a": 1}', {"type": "object", "properties": {"a": {"type": "no-such"}}})
    assert mended.error is None and mended.text == '{"a": 1}'


def test_orch_fanout_mends_a_call_to_the_real_workspace_read(orch, scripted_server, tmp_path):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider()
    (tmp_path / "a.py").write_text("line one\nline two\nline three\n")
    scripted_server.script("m", Reply(tool_calls=[{
        "name": "read", "arguments": "{'Path': 'a.py', 'limit': '1',}"}]), Reply(text="done"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "Read a.py",
                                      "--workspace", str(tmp_path), "-q", "--json"])
    assert result.exit_code == 0, result.output
    result_text = scripted_server.requests_for("m")[1].body["messages"][-1]["content"]
    assert "line one" in result_text and "line two" not in result_text  # limit 1 was applied
    assert json.loads(result.stdout)["legs"][0]["json_repairs"] == 1
