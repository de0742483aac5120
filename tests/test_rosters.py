"""Tool rosters on the wire: tier cuts, include/exclude, third-party tools, the recorded roster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


class Weather:
    """A third-party plugin's tool: exempt from the tier cut, not from ``exclude``."""

    @hookimpl
    def register_tools(self, leg):
        return [Tool("weather", "Weather for a city.",
                     {"type": "object", "properties": {"city": {"type": "string"}}},
                     lambda city: f"sunny in {city}")]


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def wire_tools(run, n: int = 0) -> list[str]:
    return sorted(t["function"]["name"] for t in run.bodies[n].get("tools") or [])


def metadata(orch, run) -> dict:
    return json.loads((orch.home / "runs" / run.leg["leg_id"] / "metadata.json").read_text())


def test_a_third_party_tool_survives_the_minimal_cut_and_the_roster_is_recorded(
        orch, scripted_server, ws):
    scripted_server.script("qwen3-4b", Reply(tool_calls=[
        {"name": "weather", "arguments": {"city": "Oslo"}}]), Reply(text="sunny"))
    run = orch.run_leg("qwen3-4b", "Weather?", workspace=ws, plugins=[("weather", Weather())])
    assert wire_tools(run) == ["grep", "list", "read", "weather"]
    meta = metadata(orch, run)
    assert meta["roster"] == ["grep", "list", "read", "weather"]
    assert meta["roster_cut"] == {"tier": "minimal", "tier_cut": ["glob"]}
    assert run.bodies[1]["messages"][-1]["content"] == "sunny in Oslo"


def test_exclude_removes_a_tool_and_always_wins(orch, scripted_server, ws):
    orch.config(plugin_config={"rosters": {"models": {
        "scripted/reviewer-70b": {"exclude": ["grep", "weather"]},
        "scripted/qwen3-4b": {"include": ["glob", "grep"], "exclude": ["grep"]}}}})
    big = orch.run_leg("reviewer-70b", "q", workspace=ws, plugins=[("weather", Weather())])
    assert wire_tools(big) == ["glob", "list", "read"]
    assert metadata(orch, big)["roster"] == ["glob", "list", "read"]
    assert metadata(orch, big)["roster_cut"] == {"excluded": ["grep", "weather"]}
    small = orch.run_leg("qwen3-4b", "q", workspace=ws)
    assert wire_tools(small) == ["glob", "list", "read"]  # glob included, grep excluded
    assert metadata(orch, small)["roster_cut"] == {"excluded": ["grep"]}


def test_tier_rosters_and_a_global_exclude_come_from_config(orch, scripted_server, ws):
    orch.config(plugin_config={"rosters": {"tiers": {"minimal": ["read"]},
                                           "exclude": ["list"]}})
    small = orch.run_leg("qwen3-4b", "q", workspace=ws, plugins=[("weather", Weather())])
    assert wire_tools(small) == ["read", "weather"]
    assert metadata(orch, small)["roster_cut"] == {"excluded": ["list"], "tier": "minimal",
                                                   "tier_cut": ["glob", "grep"]}
    big = orch.run_leg("reviewer-70b", "q", workspace=ws)
    assert wire_tools(big) == ["glob", "grep", "read"]


def test_a_roster_cut_to_nothing_sends_no_tools_and_records_an_empty_roster(
        orch, scripted_server, ws):
    orch.config(plugin_config={"rosters": {"exclude": ["read", "grep", "glob", "list"]}})
    run = orch.run_leg("reviewer-70b", "q", workspace=ws)
    assert "tools" not in run.bodies[0]
    assert metadata(orch, run)["roster"] == []


def test_tools_none_offers_no_tool_at_all(orch, scripted_server, ws):
    orch.provider()
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/reviewer-70b", "-p", "q",
                                      "--tools", "none", "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    assert "tools" not in scripted_server.requests_for("reviewer-70b")[0].body
    leg = json.loads(result.stdout)["legs"][0]
    assert leg["roster"] == []
    run = orch.run_leg("reviewer-70b", "q", workspace=ws, plugins=[("weather", Weather())],
                       options={"tools": "none"})
    assert "tools" not in run.bodies[0]
    assert metadata(orch, run)["roster_cut"] == {"tools_none": ["weather"]}
