"""Capability tiers on the wire: what a default-tier and a minimal-tier model are sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

# A third-party tool whose schema uses everything a grammar-constrained decoder chokes on.
FANCY = {
    "type": "object",
    "$defs": {
        "Range": {"type": "object", "title": "Range",
                  "properties": {"start": {"type": "integer", "minimum": 1},
                                 "end": {"type": "integer"}},
                  "required": ["start"]},
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"},
                                                   "name": {"type": "string"}}},
    },
    "properties": {
        "when": {"type": "string", "format": "date-time", "description": "Since when."},
        "ticket": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
        "range": {"$ref": "#/$defs/Range", "description": "Lines."},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "target": {"oneOf": [{"type": "object", "properties": {"id": {"type": "string"}}},
                             {"type": "string"}]},
        "mode": {"type": ["string", "null"], "enum": ["fast", "slow", None]},
        "meta": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                            "required": ["a"]},
                           {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
        "tree": {"$ref": "#/$defs/Node"},
        "format": {"type": "string", "const": "json"},  # a parameter *named* format stays
    },
    "required": ["ticket", "range"],
    "additionalProperties": False,
}
FORBIDDEN = {"format", "pattern", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
             "title", "const"}


class Lookup:
    """A third-party plugin offering one tool (Tool.builtin is False)."""

    @hookimpl
    def register_tools(self, leg):
        return [Tool("lookup", "Look up a ticket.", FANCY, lambda **kw: "found")]


def schema_keywords(node, found=None) -> set[str]:
    """Every keyword used at a schema position (property *names* are not keywords)."""
    found = set() if found is None else found
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(key)
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    schema_keywords(sub, found)
            elif key in ("items", "additionalProperties", "$defs", "definitions"):
                for sub in (value.values() if key in ("$defs", "definitions") else [value]):
                    schema_keywords(sub, found)
            elif key in ("anyOf", "oneOf", "allOf"):
                for sub in value:
                    schema_keywords(sub, found)
    return found


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("# notes\nnothing much\n")
    return root


def tools_on_wire(body) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in body.get("tools") or []}


def test_a_default_tier_model_sees_the_full_roster_and_untouched_schemas(orch, scripted_server,
                                                                        ws):
    from orch_plugins.workspace import SCHEMAS

    run = orch.run_leg("reviewer-70b", "Review.", workspace=ws,
                       plugins=[("lookup", Lookup())])
    body = run.bodies[0]
    assert run.leg["tier"] == "default" and run.leg["tier_source"] == "name"
    assert {t["type"] for t in body["tools"]} == {"function"}
    assert tools_on_wire(body) == {
        **{name: {"name": name, "description": description, "parameters": parameters}
           for name, (description, parameters) in SCHEMAS.items()},
        "lookup": {"name": "lookup", "description": "Look up a ticket.", "parameters": FANCY}}
    assert body["messages"] == [{"role": "user", "content": "Review."}]  # no system prompt
    assert "temperature" not in body
    assert run.leg["roster"] == ["glob", "grep", "list", "lookup", "read"]


@pytest.mark.parametrize("model", ["reviewer-70b", "house-model"])
def test_default_tier_requests_are_byte_identical_without_the_tiers_plugin(
        orch, scripted_server, ws, monkeypatch, model):
    script = [Reply(tool_calls=[{"name": "list", "arguments": {}, "id": "call_l"},
                                {"name": "lookup", "arguments": {"ticket": "A-1"},
                                 "id": "call_k"}]),
              Reply(text="reviewed")]

    def wire(**kwargs) -> tuple[list[str], dict]:
        scripted_server.script(model, *script)
        run = orch.run_leg(model, "Review the notes.", workspace=ws,
                           plugins=[("lookup", Lookup())], **kwargs)
        return [json.dumps(body) for body in run.bodies], run.leg

    with_tiers, leg_on = wire()
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "tiers")
    without, leg_off = wire()
    assert leg_on["tier"] == "default" and "tier" not in leg_off  # the plugin really was off
    assert len(with_tiers) == 2 and with_tiers == without


def test_a_small_model_gets_the_compact_prompt_minimal_roster_and_lowered_schemas(
        orch, scripted_server, ws):
    from orch_plugins.tiers import minimal_prompt

    scripted_server.script("qwen3-4b", Reply(tool_calls=[
        {"name": "lookup", "arguments": {"ticket": "A-1", "range": {"start": 1}}}]),
        Reply(text="A-1 is open"))
    run = orch.run_leg("qwen3-4b", "Is A-1 open?", workspace=ws, plugins=[("lookup", Lookup())])
    body = run.bodies[0]
    assert run.leg["tier"] == "minimal" and run.leg["tier_source"] == "name"
    tools = tools_on_wire(body)
    assert sorted(tools) == ["grep", "list", "lookup", "read"]  # glob cut, lookup kept
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == minimal_prompt({"read": 1, "grep": 1, "list": 1, "lookup": 1})
    assert "Find files first (list, grep)" in system["content"]
    lowered = tools["lookup"]["parameters"]
    assert not schema_keywords(lowered) & FORBIDDEN
    props = lowered["properties"]
    assert props["format"] == {"type": "string", "enum": ["json"]}
    assert props["when"] == {"type": "string", "description": "Since when."}
    assert props["range"] == {"type": "object", "description": "Lines.",
                              "properties": {"start": {"type": "integer", "minimum": 1},
                                             "end": {"type": "integer"}},
                              "required": ["start"]}
    assert props["limit"] == {"type": "integer", "default": None}
    assert props["target"] == {"type": "string"}
    assert props["mode"]["type"] == "string"
    assert props["meta"] == {"type": "object", "properties": {"a": {"type": "string"},
                                                              "b": {"type": "boolean"}},
                             "required": ["a", "b"]}
    assert props["tree"]["properties"]["child"] == {"type": "object"}  # the cycle, cut
    assert lowered["required"] == ["ticket", "range"]
    # the workspace tools were already grammar-safe: lowering leaves them as they were
    from orch_plugins.workspace import SCHEMAS

    assert tools["read"]["parameters"] == SCHEMAS["read"][1]
    assert body["temperature"] == 0.2 and run.leg["sampling_pinned"] == {"temperature": 0.2}
    assert run.leg["status"] == "complete" and run.leg["answer"] == "A-1 is open"


def test_the_compact_prompt_stays_under_1200_tokens():
    from orch_plugins.tiers import minimal_prompt

    from orchestrator.runtime import litellm

    prompt = minimal_prompt({"read": 1, "grep": 1, "glob": 1, "list": 1})
    tokens = litellm().token_counter(model="gpt-4o", text=prompt)
    assert 50 < tokens <= 1200


def model_cli(*args: str):
    return CliRunner().invoke(cli, ["model", *args])


def test_set_tier_pins_a_model_by_its_canonical_name(orch, scripted_server, ws):
    orch.provider()
    orch.config(aliases={"big": "scripted/reviewer-70b"})
    result = model_cli("set-tier", "big@hot", "minimal")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "scripted/reviewer-70b: tier minimal"
    cfg = json.loads((orch.home / "config.json").read_text())
    assert cfg["plugin_config"]["tiers"]["models"] == {"scripted/reviewer-70b": "minimal"}
    assert model_cli("tiers").stdout.strip() == "scripted/reviewer-70b  minimal"

    run = orch.run_leg("reviewer-70b", "Review.", workspace=ws)
    assert run.leg["tier"] == "minimal" and run.leg["tier_source"] == "config"
    assert run.bodies[0]["messages"][0]["role"] == "system"
    assert "glob" not in tools_on_wire(run.bodies[0])

    assert model_cli("set-tier", "scripted/qwen3-4b", "default").exit_code == 0
    assert orch.run_leg("qwen3-4b", "q", workspace=ws).leg["tier_source"] == "config"
    assert model_cli("set-tier", "big", "auto").exit_code == 0
    assert model_cli("set-tier", "scripted/qwen3-4b", "auto").exit_code == 0
    assert "plugin_config" not in json.loads((orch.home / "config.json").read_text())
    assert orch.run_leg("reviewer-70b", "q", workspace=ws).leg["tier_source"] == "name"

    bad = model_cli("set-tier", "nope", "minimal")
    assert bad.exit_code == 2 and "has no provider" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert model_cli("set-tier", "scripted/x", "tiny").exit_code == 2  # click names the choices


def test_per_model_prompt_and_sampling_overrides(orch, scripted_server, ws):
    orch.config(plugin_config={"tiers": {
        "minimal": {"sampling": {"temperature": 0.1, "top_p": 0.8}},
        "overrides": {"scripted/reviewer-70b": {"prompt": "Be a terse reviewer.",
                                                "sampling": {"seed": 7}},
                      "scripted/qwen3-4b": {"prompt": "Tiny model, tiny prompt."}}}})
    big = orch.run_leg("reviewer-70b", "Review.", workspace=ws).bodies[0]
    assert big["messages"][0] == {"role": "system", "content": "Be a terse reviewer."}
    assert big["seed"] == 7 and "temperature" not in big
    small = orch.run_leg("qwen3-4b", "Review.", workspace=ws).bodies[0]
    assert small["messages"][0] == {"role": "system", "content": "Tiny model, tiny prompt."}
    assert (small["temperature"], small["top_p"]) == (0.1, 0.8)
    # a variant the user asked for on this run wins over the pinned value
    hot = orch.run_leg("qwen3-4b@hot", "Review.", workspace=ws)
    assert (hot.bodies[0]["temperature"], hot.bodies[0]["top_p"]) == (1.0, 0.95)
    assert "sampling_pinned" not in hot.leg


@pytest.mark.parametrize("name, billions", [
    ("myvllm/qwen3-4b", 4), ("hf/Qwen/Qwen3-8B-Instruct", 8), ("local/gemma-3-270m", 0.27),
    ("ollama/qwen3:1.7b", 1.7), ("x/mixtral-8x7b", 56), ("x/qwen3-30b-a3b", 30),
    ("x/gemma-4-26b-a4b-it", 26), ("x/Meta-Llama-3.1-405B", 405), ("x/qwen3", None),
    ("x/gpt-4o-mini", None), ("x/llama-v3p2-3b-instruct", 3), ("x/phi3.5", None),
])
def test_parameter_counts_are_read_from_names(name, billions):
    from orch_plugins.tiers import params_b

    assert params_b(name) == (pytest.approx(billions) if billions is not None else None)


def test_the_decision_order_config_catalogue_name(tmp_path):
    from orch_plugins.tiers import decide

    from orchestrator.config import Config
    from orchestrator.models.addressing import resolve

    cfg = Config(path=tmp_path / "c.json", data={
        "providers": {"box": {"base_url": "http://127.0.0.1:1/v1"}}, "aliases": {},
        "plugin_config": {"tiers": {"models": {"box/qwen3-8b": "default"},
                                    "minimal_max_params_b": 3}}})
    assert decide(resolve("box/qwen3-8b", cfg), cfg) == ("default", "config")
    assert decide(resolve("openai/gpt-4o-mini", cfg), cfg) == ("default", "catalog")
    assert decide(resolve("box/llama-3b", cfg), cfg) == ("minimal", "name")
    assert decide(resolve("box/mistral-7b", cfg), cfg) == ("default", "name")  # limit is 3B
    assert decide(resolve("box/house", cfg), cfg) == ("default", "fallback")


RUBBISH = st.recursive(
    st.sampled_from([{}, {"type": "string"}, {"type": "integer", "minimum": 0},
                     {"type": "string", "format": "uri", "pattern": "^h"},
                     {"$ref": "#/$defs/A"}, {"$ref": "#/nowhere"}, {"type": ["null", "number"]},
                     {"const": 3}, True]),
    lambda inner: st.one_of(
        st.builds(lambda ps: {"type": "object", "properties": ps},
                  st.dictionaries(st.sampled_from(["a", "format", "$ref", "x"]), inner,
                                  max_size=3)),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"type": "array", "items": x}, inner),
        st.builds(lambda x: {"$defs": {"A": x}, "$ref": "#/$defs/A"}, inner)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(RUBBISH)
def test_lowering_any_schema_leaves_only_the_safe_subset(schema):
    from orch_plugins.tiers import KEEP, lower_schema

    lowered = lower_schema(schema)
    json.dumps(lowered)  # plain JSON
    assert schema_keywords(lowered) <= KEEP
    assert lower_schema(lowered) == lowered  # lowering is idempotent
