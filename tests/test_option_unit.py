"""An option says its unit (``Option.unit``) in ``--help`` and the MCP schema; a run ceiling is
counted in US dollars, and one declared in another unit is refused, never silently read as
dollars (orchestrator/options.py)."""

from __future__ import annotations

import types

import click
import pytest

from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option


def help_of(option: Option) -> str:
    from orchestrator.cli.plugin_options import click_option

    command = click.Command("fanout", params=[click_option(option)])
    return command.get_help(click.Context(command))


def test_a_unit_is_said_in_help_and_the_mcp_schema():
    from orchestrator.mcp_server.schemas import option_property

    words = Option("max-words", type="int", min=1, help="Answers of at most N.", unit="words")
    assert "Answers of at most N. [unit: words]" in help_of(words)
    assert option_property(words)["description"] == "Answers of at most N. [unit: words]"
    told = Option("max-words", type="int", help="Short.", mcp_help="Cap each answer's words.")
    assert option_property(told)["description"] == "Cap each answer's words."


def test_a_run_ceiling_says_it_counts_dollars():
    ceiling = Option("max-spend", type="float", min=0, min_open=True, run_ceiling=True,
                     help="Stop the run here.")
    assert "[unit: USD]" in help_of(ceiling)
    assert Option("max-usd", type="float", run_ceiling=True, unit="USD").described == "[unit: USD]"


def test_a_run_ceiling_in_another_currency_is_refused():
    with pytest.raises(ValueError, match="counted in US dollars.*not 'EUR'.*converts no"):
        Option("max-euros", type="float", run_ceiling=True, unit="EUR")


def test_a_plugin_declaring_one_loses_its_options_with_one_warning(orch_home):
    from orchestrator.plugin_host.declared import declared_options
    from orchestrator.plugin_host.plugins import load

    plugin = types.ModuleType("euros")

    @hookimpl
    def register_options(command):
        return [Option("max-euros", type="float", run_ceiling=True, unit="EUR")]

    plugin.register_options = register_options
    pm = load(enabled=False, extra=[("euros", plugin)])
    warnings: list[str] = []
    assert declared_options(pm, "fanout", warn=warnings.append) == []
    assert len(warnings) == 1 and warnings[0].startswith("plugin euros: register_options failed")
    assert "US dollars" in warnings[0]


def test_the_kit_shows_a_plugins_options_as_an_mcp_client_sees_them(orch):
    plugin = types.ModuleType("wordy")

    @hookimpl
    def register_options(command):
        return [Option("max-words", type="int", min=1, help="At most N.", unit="words")]

    plugin.register_options = register_options
    tools = orch.mcp_tools(plugins=[plugin])
    assert tools["fanout"]["inputSchema"]["properties"]["max_words"] == \
        {"type": "integer", "minimum": 1, "description": "At most N. [unit: words]"}
    assert "max_words" not in orch.mcp_tools()["fanout"]["inputSchema"]["properties"]
