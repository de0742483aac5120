"""`orch completion` and what a TAB completes: model names, aliases, councils, run ids and
plugin names, read from files — never importing litellm."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o nosort -F _orch_completion"),
                                          ("zsh", "#compdef orch"),
                                          ("fish", "complete --no-files --command orch")])
def test_the_script_for_each_shell(shell, marker):
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0 and marker in result.stdout
    assert "_ORCH_COMPLETE" in result.stdout


def test_an_unknown_shell_is_a_usage_error():
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.output


def complete(home, words: str, *, importtime: bool = False, **env: str) -> tuple[list[str], str]:
    """What bash would offer for ``words`` (the last word is the one being completed)."""
    full = {**os.environ, "ORCH_HOME": str(home), "_ORCH_COMPLETE": "bash_complete",
            "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1), **env}
    argv = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "orchestrator"]
    done = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()], done.stderr


@pytest.fixture
def configured(orch, scripted_server, monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    scripted_server.script("qwen3-8b", Reply(text="x"))
    orch.provider("lab")
    orch.config(aliases={"fast": "lab/qwen3-8b", "slow": "lab/big"},
                councils={"pair": ["lab/a", "lab/b"], "trio": ["lab/a", "lab/b", "lab/c"]})
    CliRunner().invoke(cli, ["models", "--json"])  # fills the /models cache
    wave = orch.run_leg("qwen3-8b").doc["wave_id"]
    return orch.home, wave


def test_models_aliases_councils_run_ids_and_plugins_complete(configured):
    home, wave = configured
    assert complete(home, "orch fanout --models ")[0] == [
        "fast", "lab/", "lab/qwen3-8b", "local/gemma3-270m", "slow"]
    assert complete(home, "orch fanout --models fast,lab/q")[0] == ["fast,lab/qwen3-8b"]
    assert complete(home, "orch fanout --chair f")[0] == ["fast"]
    assert complete(home, "orch fanout --council ")[0] == ["pair", "trio"]
    assert complete(home, "orch alias remove s")[0] == ["slow"]
    assert complete(home, "orch status ")[0] == [wave]
    assert complete(home, "orch runs tail ")[0] == [wave]
    assert "workspace" in complete(home, "orch plugins w")[0]
    assert {"show", "tail", "gc"} <= set(complete(home, "orch runs ")[0])


def test_completing_never_imports_litellm(configured, monkeypatch):
    home, _ = configured
    offered, imports = complete(home, "orch fanout --models openai/gpt-4o-mi", importtime=True,
                                OPENAI_API_KEY="sk-completion-test-000000000000")
    assert "openai/gpt-4o-mini" in offered  # litellm's names, from its JSON file
    imported = {line.rsplit("|", 1)[-1].strip() for line in imports.splitlines()
                if line.startswith("import time:")}
    assert "orchestrator.operations.completion" in imported
    assert not [m for m in imported if m.split(".")[0] == "litellm"]


def test_a_broken_config_completes_nothing_rather_than_failing(orch_home):
    (orch_home / "config.json").write_text("{broken")
    assert complete(orch_home, "orch fanout --models ")[0] == ["local/gemma3-270m"]


def test_orch_plugins_name_shows_one_plugin(orch_home):
    one = CliRunner().invoke(cli, ["plugins", "workspace", "--json"])
    assert [p["name"] for p in json.loads(one.stdout)["plugins"]] == ["workspace"]
    missing = CliRunner().invoke(cli, ["plugins", "nope"])
    assert missing.exit_code == 2 and "no plugin 'nope' is installed" in missing.output
