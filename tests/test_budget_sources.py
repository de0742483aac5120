"""A budget asked for from any source is enforced or refused: config's plugin sections, a
bench file, a council run. With its plugin off, nothing is sent: exit 2, one line naming
where the budget was asked for and the fix."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

# each guard plugin's declared options' config keys (Option.config), with a value to set
CONFIGURED = [("cost_ceiling", "max_usd", 0.01), ("output_budget", "tokens", 100),
              ("output_budget", "thinking", "low"), ("turn_budget", "tokens", 500),
              ("turn_budget", "seconds", 5.0)]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.fixture
def priced(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.default = Reply(text="an answer", usage={"prompt_tokens": 20,
                                                             "completion_tokens": 200})
    return orch


def off_by_name(monkeypatch, plugin: str) -> None:
    from orchestrator import runtime

    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", plugin)
    runtime.plugin_manager.cache_clear()


@pytest.mark.parametrize(("plugin", "name", "value"), CONFIGURED,
                         ids=[f"{p}.{n}" for p, n, _ in CONFIGURED])
@pytest.mark.parametrize("how", ["--no-plugins", "ORCH_DISABLE_PLUGINS"])
def test_a_budget_in_config_with_its_plugin_off_is_refused_before_any_spend(
        priced, scripted_server, orch_home, monkeypatch, plugin, name, value, how):
    priced.config(plugin_config={plugin: {name: value}})
    args = ["fanout", "-m", "scripted/m", "-p", "q", "--tools", "none"]
    if how == "--no-plugins":
        args.append("--no-plugins")
    else:
        off_by_name(monkeypatch, plugin)
    result = invoke(*args)
    assert result.exit_code == 2
    line = one_line(result)
    where = f"plugin_config.{plugin}.{name}"
    assert line.startswith(f"orch: error: {where} in config.json needs the {plugin} plugin, "
                           "which is not loaded (")
    assert line.endswith(f", or remove {where} from config.json")
    fix = "drop --no-plugins" if how == "--no-plugins" else f"remove {plugin} from " \
        "ORCH_DISABLE_PLUGINS"
    assert fix in line
    assert scripted_server.count() == 0 and not (orch_home / "ledger.db").exists()


def test_the_issues_case_a_config_ceiling_with_no_plugins_spends_nothing(
        priced, scripted_server):
    priced.config(plugin_config={"cost_ceiling": {"max_usd": 0.01}})
    result = invoke("fanout", "-m", "scripted/a,scripted/b", "-p", "q", "--no-plugins")
    assert result.exit_code == 2 and scripted_server.count() == 0
    # with the plugin on, the same config is enforced: both launches refused
    on = invoke("fanout", "-m", "scripted/a,scripted/b", "-p", "q", "--tools", "none")
    assert on.exit_code != 0 and scripted_server.count() == 0
    assert "COST_CEILING" in on.stdout


def test_a_flag_wins_over_config_and_is_named(priced, scripted_server):
    priced.config(plugin_config={"cost_ceiling": {"max_usd": 0.01}})
    result = invoke("fanout", "-m", "scripted/m", "-p", "q", "--no-plugins", "--max-cost", "5")
    assert result.exit_code == 2
    assert one_line(result).startswith("orch: error: --max-cost needs the cost_ceiling plugin")


def test_thinking_none_in_config_asks_for_nothing(priced, scripted_server):
    priced.config(plugin_config={"output_budget": {"thinking": "none"}})
    result = invoke("fanout", "-m", "scripted/m", "-p", "q", "--no-plugins", "--tools", "none")
    assert result.exit_code == 0 and scripted_server.count() == 1


def test_a_council_run_with_a_config_ceiling_and_no_plugins_is_refused(
        priced, scripted_server):
    priced.config(plugin_config={"cost_ceiling": {"max_usd": 0.01}})
    result = invoke("council", "run", "-m", "scripted/a,scripted/b", "--chair", "scripted/c",
                    "-p", "review this", "--no-plugins")
    assert result.exit_code == 2, result.output
    assert "plugin_config.cost_ceiling.max_usd in config.json needs the cost_ceiling" \
        in one_line(result)
    assert scripted_server.count() == 0


@pytest.mark.parametrize("source", ["flag", "file"])
def test_a_bench_ceiling_with_a_contestant_that_disables_its_plugin_runs_nothing(
        priced, scripted_server, tmp_path, source):
    config = tmp_path / "bench.toml"
    config.write_text(("[bench]\nmax_cost = 5\n" if source == "file" else "")
                      + '[[contestants]]\nname = "m"\nmodel = "scripted/m"\n'
                      'disable_plugins = ["cost_ceiling"]\n')
    args = ["bench", "--config", str(config), "--builtin", "format", "--trials", "1"]
    if source == "flag":
        args += ["--max-cost", "5"]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    where = f"max_cost in {config}" if source == "file" else "--max-cost"
    assert f"{where} (contestant m) needs the cost_ceiling plugin" in result.stderr
    assert scripted_server.count() == 0


def test_a_retry_keeps_its_waves_ceiling_and_refuses_without_its_plugin(
        priced, scripted_server):
    scripted_server.script("a", Reply(text="fine"))
    scripted_server.script("b", Reply(status=500))
    first = invoke("fanout", "-m", "scripted/a,scripted/b", "-p", "q", "--tools", "none",
                   "--max-cost", "9", "--json")
    wave_id = json.loads(first.stdout)["wave_id"]
    sent = scripted_server.count()
    result = invoke("fanout", "--retry-failed", wave_id, "--no-plugins")
    assert result.exit_code == 2
    line = one_line(result)
    assert line.startswith(f"orch: error: --max-cost (kept from wave {wave_id}) needs the "
                           "cost_ceiling plugin")
    assert line.endswith("drop --no-plugins: a retry keeps its wave's budgets")
    assert scripted_server.count() == sent
