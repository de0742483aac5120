"""What a plugin author touches: tools from plain functions, settings outside a leg, a broken
``resolve_model`` isolated like every other hook."""

from __future__ import annotations

from typing import Literal

import pytest

import orchestrator
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


def search(query: str, limit: int, ratio: float = 0.5, exact: bool = False,
           tags: list[str] | None = None, mode: Literal["fast", "deep"] = "fast",
           since: str | None = None) -> str:
    """Search the notes.

    Only the notes of this project.

    Args:
        query: What to look for.
        limit: At most this many hits.
        ratio: How close a hit must be.
        exact: Whole words only.
        tags: Only notes with all these tags.
        mode: How hard to look.
    """
    return f"{query}:{limit}:{ratio}:{exact}:{tags}:{mode}:{since}"


def test_the_schema_comes_from_type_hints_and_the_docstring():
    tool = Tool.from_function(search)
    assert tool.name == "search"
    assert tool.description == "Search the notes. Only the notes of this project."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "At most this many hits."},
            "ratio": {"type": "number", "description": "How close a hit must be.",
                      "default": 0.5},
            "exact": {"type": "boolean", "description": "Whole words only.", "default": False},
            "tags": {"type": "array", "items": {"type": "string"},
                     "description": "Only notes with all these tags."},
            "mode": {"type": "string", "enum": ["fast", "deep"],
                     "description": "How hard to look.", "default": "fast"},
            "since": {"type": "string"},  # Optional, undocumented: no description
        },
        "required": ["query", "limit"],
    }


def test_rest_style_docstrings_and_overrides_work_too():
    def lookup(word: str, *, strict: bool = True) -> str:
        """Look a word up.

        :param word: the word
        :param strict: refuse near misses
        """
        return word

    tool = Tool.from_function(lookup, name="dictionary", description="A dictionary.")
    assert (tool.name, tool.description) == ("dictionary", "A dictionary.")
    assert tool.parameters["properties"]["word"] == {"type": "string",
                                                     "description": "the word"}
    assert tool.parameters["required"] == ["word"]


def test_a_function_without_hints_or_docstring_still_makes_a_tool():
    with pytest.raises(TypeError, match="pass name="):
        Tool.from_function(lambda text, n=1: text * n)
    tool = Tool.from_function(lambda text, n=1: text * n, name="repeat")
    assert tool.parameters == {"type": "object", "properties": {"text": {}, "n": {"default": 1}},
                               "required": ["text"]}
    assert tool.description == ""


def test_positional_only_parameters_are_refused():
    def f(a: int, /) -> int:
        return a

    with pytest.raises(TypeError, match="positional-only"):
        Tool.from_function(f)


class Notes:
    NAME = "notes"

    @hookimpl
    def register_tools(self, leg):
        return [Tool.from_function(search)]  # built per leg: the engine stamps each copy


def test_a_tool_from_a_function_runs_in_a_leg_and_its_schema_is_on_the_wire(
        orch, scripted_server):
    scripted_server.script("m", Reply(tool_calls=[{"name": "search", "arguments": {
        "query": "gate", "limit": 2, "mode": "deep"}}]), Reply(text="found"))
    run = orch.run_leg("m", "find", plugins=[Notes()])
    first, second = run.bodies
    sent = {t["function"]["name"]: t["function"] for t in first["tools"]}["search"]
    assert sent["parameters"]["required"] == ["query", "limit"]
    assert sent["description"] == "Search the notes. Only the notes of this project."
    assert second["messages"][-1]["content"] == "gate:2:0.5:False:None:deep:None"
    assert run.leg["status"] == "complete"


def test_plugin_config_outside_a_leg(orch, scripted_server):
    assert orchestrator.plugin_config("notes") == {}
    orch.config(plugin_config={"notes": {"dir": "/tmp/notes"}})
    assert orchestrator.plugin_config("notes") == {"dir": "/tmp/notes"}

    seen = {}

    class WaveStart:
        @hookimpl
        def wave_start(self, wave):
            seen["settings"] = wave.plugin_config("notes")

    orch.run_leg("m", "hi", plugins=[("watcher", WaveStart())])
    assert seen["settings"] == {"dir": "/tmp/notes"}


class BrokenResolver:
    @hookimpl
    def resolve_model(self, spec, config):
        raise RuntimeError("resolver exploded")


def test_a_raising_resolver_is_skipped_with_a_warning_and_the_run_goes_on(
        orch, scripted_server, capsys):
    scripted_server.script("m", Reply(text="fine"))
    run = orch.run_leg("m", "hi", plugins=[("brittle", BrokenResolver())])
    assert run.leg["status"] == "complete" and run.leg["model"] == "scripted/m"
    assert scripted_server.count("m") == 1
    err = capsys.readouterr().err
    assert err.count("plugin brittle: resolve_model failed and was skipped: "
                     "RuntimeError: resolver exploded") == 1


def test_a_deliberate_orch_error_from_a_resolver_still_stops_the_command(orch):
    from orchestrator.errors import OrchError

    class Owner:
        @hookimpl
        def resolve_model(self, spec, config):
            raise OrchError("scripted/m is ours and cannot be served today")

    with pytest.raises(OrchError, match="ours"):
        orch.run_leg("m", "hi", plugins=[("owner", Owner())])
