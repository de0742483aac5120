"""Plugins declare their own options (``register_options``): one declaration is a flag of
``orch fanout`` and ``orch council run`` (in ``--help`` and completion), a property of the
MCP tools' schemas, and a value the plugin reads from the wave's options. A disabled
plugin's option does not exist."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_plugins_loading import orch_process, site  # noqa: F401 - the fixture

from orchestrator import runtime
from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

# A third-party plugin: --max-words N asks for short answers, on the wire.
MAX_WORDS = """
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

@hookimpl
def register_options(command):
    return [Option("max-words", type="int", min=1, max=500, metavar="N", config="words",
                   help="Ask every model to answer in at most N words.")]

@hookimpl
def before_request(leg, request):
    words = leg.options.get("max_words") or leg.plugin_config("wordcap").get("words")
    if words is None:
        return None
    last = request.messages[-1]
    capped = {**last, "content": last["content"].rstrip() + f" (at most {words} words)"}
    return request.evolve(messages=[*request.messages[:-1], capped])
"""


@pytest.fixture
def wordcap(site):  # noqa: F811 - the fixture imported above
    site.install("orch-wordcap", "1.0", {"wordcap": MAX_WORDS})
    return site


def test_the_declared_option_is_in_both_commands_help(orch_home, wordcap):
    fanout = CliRunner().invoke(cli, ["fanout", "--help"])
    council = CliRunner().invoke(cli, ["council", "run", "--help"])
    assert fanout.exit_code == 0 and council.exit_code == 0, fanout.output
    for shown in (fanout.stdout, council.stdout):
        assert "--max-words N" in shown
        assert "Ask every model to answer in at most N words." in shown


def test_the_option_reaches_the_plugin_on_the_wire(orch, scripted_server, wordcap):
    orch.provider()
    scripted_server.script("m", Reply(text="one"), Reply(text="two"))
    given = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--json",
                                     "--max-words", "12"])
    plain = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--json"])
    assert given.exit_code == 0 and plain.exit_code == 0, given.output + plain.output
    sent = [r.body["messages"][-1]["content"] for r in scripted_server.requests_for("m")]
    assert sent == ["hi (at most 12 words)", "hi\n"]
    assert json.loads(given.stdout)["options"]["max_words"] == 12  # wave.json says so


def test_the_option_is_checked_like_a_built_in_one(orch, wordcap):
    bad = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--max-words",
                                   "0"])
    assert bad.exit_code == 2
    assert "Invalid value for '--max-words': '0' must be at least 1 " in bad.output


def test_with_no_plugins_the_option_is_refused_in_one_line(orch, scripted_server, wordcap):
    orch.provider()
    ran = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--no-plugins",
                                   "--max-words", "12"])
    assert ran.exit_code == 2
    assert ran.stderr.strip() == (
        "orch: error: --max-words needs the wordcap plugin, which is not loaded "
        "(--no-plugins loads no plugins); drop --no-plugins, or drop --max-words")
    assert scripted_server.requests_for("m") == []


def test_disabled_the_option_does_not_exist(orch, scripted_server, wordcap, monkeypatch):
    orch.provider()
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "wordcap")
    helped = CliRunner().invoke(cli, ["fanout", "--help"])
    assert helped.exit_code == 0 and "--max-words" not in helped.stdout
    ran = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi",
                                   "--max-words", "12"])
    assert ran.exit_code == 2
    assert "No such option '--max-words'" in ran.output
    assert scripted_server.requests_for("m") == []


def test_the_mcp_tools_schemas_carry_the_option(orch_home, wordcap, monkeypatch):
    from orchestrator.mcp_server.schemas import plugin_tools

    tools = plugin_tools()
    for name in ("fanout", "council_run"):
        prop = tools[name]["inputSchema"]["properties"]["max_words"]
        assert prop == {"type": "integer", "minimum": 1, "maximum": 500,
                        "description": "Ask every model to answer in at most N words."}
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "wordcap")
    assert "max_words" not in plugin_tools()["fanout"]["inputSchema"]["properties"]


def test_the_option_completes_in_the_real_shell_completion(orch_home, wordcap):
    """TAB after ``orch fanout --max-`` offers the plugin's flag (the real entry point)."""
    ran = orch_process(home=orch_home, site=wordcap, _ORCH_COMPLETE="bash_complete",
                       COMP_WORDS="orch fanout --max-", COMP_CWORD="2")
    assert ran.returncode == 0, ran.stderr
    assert "--max-words" in ran.stdout


def test_the_real_orch_shows_and_passes_the_option(orch, scripted_server, orch_home, wordcap):
    orch.provider()
    scripted_server.script("m", Reply(text="short"))
    helped = orch_process("council", "run", "--help", home=orch_home, site=wordcap)
    assert helped.returncode == 0 and "--max-words N" in helped.stdout
    ran = orch_process("fanout", "-m", "scripted/m", "-p", "hi", "--json", "--max-words", "7",
                       home=orch_home, site=wordcap)
    assert ran.returncode == 0, ran.stderr
    assert scripted_server.requests_for("m")[0].body["messages"][-1]["content"] == \
        "hi (at most 7 words)"


def test_disabled_a_config_value_for_the_option_is_refused(orch, scripted_server, wordcap,
                                                           monkeypatch):
    orch.provider()
    orch.config(plugin_config={"wordcap": {"words": 20}})
    scripted_server.script("m", Reply(text="short"))
    enabled = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--json"])
    assert enabled.exit_code == 0, enabled.output
    assert scripted_server.requests_for("m")[0].body["messages"][-1]["content"] == \
        "hi (at most 20 words)"  # the config key the option falls back to
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "wordcap")
    runtime.plugin_manager.cache_clear()  # one process, two runs: as two `orch` commands
    ran = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi"])
    assert ran.exit_code == 2
    assert ran.stderr.strip() == (
        "orch: error: plugin_config.wordcap.words in config.json needs the wordcap plugin, "
        "which is not loaded (it is disabled by ORCH_DISABLE_PLUGINS); enable it (remove "
        "wordcap from ORCH_DISABLE_PLUGINS / plugins.disabled), or remove "
        "plugin_config.wordcap.words from config.json")
    assert len(scripted_server.requests_for("m")) == 1


def test_a_broken_config_still_shows_help_and_a_run_says_what_is_wrong(orch_home, wordcap):
    """`--help` prints without the plugins' options (one line on stderr says why), exit 0;
    a run exits 1 with the config error alone, even when it passes a plugin's flag."""
    (orch_home / "config.json").write_text('{"providers": ')
    problem = f"config file {orch_home / 'config.json'} is not valid JSON (Expecting value " \
        "at line 1); fix or remove it"
    for command in (["fanout"], ["council", "run"]):
        helped = orch_process(*command, "--help", home=orch_home, site=wordcap)
        assert helped.returncode == 0, helped.stderr
        assert helped.stdout.startswith(f"Usage: orch {' '.join(command)} [OPTIONS]")
        assert "--tag" in helped.stdout and "--max-words" not in helped.stdout
        assert helped.stderr.splitlines() == [
            f"orch: warning: the plugins' options are not shown: {problem}"]
    for extra in ([], ["--max-words", "7"]):
        ran = orch_process("fanout", "-m", "scripted/m", "-p", "hi", *extra, home=orch_home,
                           site=wordcap)
        assert ran.returncode == 1 and ran.stdout == ""
        assert ran.stderr.splitlines() == [f"orch: error: {problem}"]
    (orch_home / "config.json").write_text("{}")
    fixed = orch_process("fanout", "--help", home=orch_home, site=wordcap)
    assert fixed.returncode == 0 and "--max-words" in fixed.stdout and fixed.stderr == ""
