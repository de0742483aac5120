"""``--max-cost`` is the cost_ceiling plugin's own declared option (``Option.run_ceiling``):
it exists on ``orch fanout``, ``orch council run``, ``orch bench`` and ``orch bench resume``
and as the MCP tools' ``max_cost`` only while the plugin is loaded. Disabled, the flag is
click's "No such option" (exit 2) and nothing is sent; a bench file's ``max_cost`` is refused
in one line naming the plugin (the file format keeps the key)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator import runtime
from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def ceiling_off(monkeypatch):
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "cost_ceiling")
    runtime.plugin_manager.cache_clear()
    yield
    runtime.plugin_manager.cache_clear()


def test_the_plugin_declares_max_cost_as_a_run_ceiling():
    from orch_plugins import cost_ceiling

    for command in ("fanout", "council_run", "bench"):
        (option,) = cost_ceiling.register_options(command)
        assert option.flag == "--max-cost" and option.key == "max_cost"
        assert option.run_ceiling and option.type == "float" and option.min == 0
        assert option.config == "max_usd"


@pytest.mark.parametrize("command", [["fanout"], ["council", "run"], ["bench"],
                                     ["bench", "resume"]])
def test_the_flag_is_in_help_only_while_the_plugin_is_loaded(orch_home, monkeypatch, command):
    shown = invoke(*command, "--help")
    assert shown.exit_code == 0 and "--max-cost USD" in shown.stdout, shown.output
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "cost_ceiling")
    hidden = invoke(*command, "--help")
    assert hidden.exit_code == 0 and "--max-cost" not in hidden.stdout, hidden.output


def test_disabled_fanout_max_cost_is_no_such_option_and_nothing_is_sent(
        orch, scripted_server, ceiling_off):
    orch.provider()
    scripted_server.default = Reply(text="an answer")
    ran = invoke("fanout", "-m", "scripted/m", "-p", "hi", "--tools", "none",
                 "--max-cost", "1")
    assert ran.exit_code == 2 and "No such option '--max-cost'" in ran.output, ran.output
    assert scripted_server.count() == 0


def test_disabled_bench_max_cost_is_no_such_option_and_nothing_is_sent(
        orch, scripted_server, ceiling_off, tmp_path):
    orch.provider()
    scripted_server.default = Reply(text="an answer")
    ran = invoke("bench", "--builtin", "format", "--models", "scripted/a", "--trials", "1",
                 "--max-cost", "1")
    assert ran.exit_code == 2 and "No such option '--max-cost'" in ran.output, ran.output
    resumed = invoke("bench", "resume", str(tmp_path / "r.json"), "--max-cost", "1")
    assert resumed.exit_code == 2 and "No such option '--max-cost'" in resumed.output
    assert scripted_server.count() == 0


def test_disabled_a_bench_files_max_cost_is_refused_naming_the_plugin(
        orch, scripted_server, ceiling_off, tmp_path):
    """The file format keeps ``[bench] max_cost``; its plugin off, it is refused, not an
    unknown key and not silently no ceiling."""
    orch.provider()
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\nbuiltin = "format"\ntrials = 1\nmax_cost = 2.0\n\n'
                      '[[contestants]]\nname = "a"\nmodel = "scripted/a"\n')
    ran = invoke("bench", "--config", str(config), "--yes")
    assert ran.exit_code == 2, ran.output
    line = ran.stderr.strip().splitlines()[-1]
    assert line.startswith(f"orch: error: max_cost in {config} (contestant a) needs the "
                           "cost_ceiling plugin, which is not loaded"), line
    assert scripted_server.count() == 0


def test_the_mcp_schema_has_max_cost_only_while_the_plugin_is_loaded(orch_home, monkeypatch):
    from orchestrator.mcp_server.schemas import plugin_tools

    tools = plugin_tools()
    for name in ("fanout", "council_run"):
        prop = tools[name]["inputSchema"]["properties"]["max_cost"]
        assert prop["type"] == "number" and prop["minimum"] == 0
        assert prop["description"].startswith("A spending ceiling in US dollars")
        assert "use max_cost to cap the total" in tools[name]["description"]
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "cost_ceiling")
    off = plugin_tools()
    for name in ("fanout", "council_run"):
        assert "max_cost" not in off[name]["inputSchema"]["properties"]
        assert "max_cost" not in off[name]["description"]


def test_a_retry_keeps_the_ceiling_of_a_wave_whose_plugin_is_now_disabled(
        orch, scripted_server, monkeypatch):
    """The kept ceiling is found in the disabled plugin's declaration: refused, not dropped
    (the flag itself no longer exists)."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text="fine"))
    scripted_server.script("b", Reply(status=500))
    first = invoke("fanout", "-m", "scripted/a,scripted/b", "-p", "q", "--tools", "none",
                   "--max-cost", "9", "--json")
    wave_id = json.loads(first.stdout)["wave_id"]
    sent = scripted_server.count()
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "cost_ceiling")
    runtime.plugin_manager.cache_clear()
    result = invoke("fanout", "--retry-failed", wave_id)
    runtime.plugin_manager.cache_clear()
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"orch: error: --max-cost (kept from wave {wave_id}) needs the "
                           "cost_ceiling plugin, which is not loaded (it is disabled by "
                           "ORCH_DISABLE_PLUGINS)"), line
    assert line.endswith("a retry keeps its wave's budgets"), line
    assert scripted_server.count() == sent
