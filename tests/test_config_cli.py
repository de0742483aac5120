"""`orch provider`, `orch alias`, `orch council save|list|remove` against a temporary ORCH_HOME."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.config import Config

FAKE_KEY = "sk-proj-Zx9QwErTy123456789abcdefSECRET"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def orch(home):
    runner = CliRunner()

    def run(*args: str, ok: bool = True):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        else:  # a usage mistake: one line, exit 2
            assert result.exit_code == 2, result.output
            assert result.stderr.startswith("orch: error: ")
            assert result.stderr.count("\n") == 1  # one line, no traceback
        return result

    return run


def config_text(home) -> str:
    path = home / "config.json"
    return path.read_text() if path.exists() else ""


# --------------------------------------------------------------------------- provider


def test_provider_add_list_remove(orch, home):
    out = orch("provider", "add", "myvllm", "--base-url", "http://127.0.0.1:8000/v1",
               "--input-cost-per-mtok", "0", "--output-cost-per-mtok", "0.5",
               "--max-output-tokens", "8192", "--api-key-env", "MYVLLM_KEY").stdout
    assert "added provider myvllm" in out
    entry = Config.load().providers["myvllm"]
    assert entry == {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "MYVLLM_KEY",
                     "input_cost_per_mtok": 0.0, "output_cost_per_mtok": 0.5,
                     "max_output_tokens": 8192}

    assert "myvllm" in orch("provider", "list").stdout
    listed = json.loads(orch("provider", "list", "--json").stdout)
    assert [p["id"] for p in listed] == ["myvllm"]
    assert listed[0]["base_url"] == "http://127.0.0.1:8000/v1"
    assert listed[0]["api_key_set"] is False

    assert "removed provider myvllm" in orch("provider", "remove", "myvllm").stdout
    assert Config.load().providers == {}
    assert json.loads(orch("provider", "list", "--json").stdout) == []


def test_provider_list_shows_whether_key_is_set_never_the_key(orch, monkeypatch):
    monkeypatch.setenv("MYVLLM_KEY", FAKE_KEY)
    orch("provider", "add", "myvllm", "--base-url", "http://h/v1", "--api-key-env", "MYVLLM_KEY")
    human = orch("provider", "list").output
    assert "$MYVLLM_KEY (set)" in human
    as_json = orch("provider", "list", "--json").output
    assert json.loads(as_json)[0]["api_key_set"] is True
    assert FAKE_KEY not in human + as_json


def test_provider_readd_replaces_and_says_so(orch):
    orch("provider", "add", "p", "--base-url", "http://old/v1", "--max-output-tokens", "100")
    out = orch("provider", "add", "p", "--base-url", "https://new/v1").stdout
    assert "replaced provider p" in out and "http://old/v1" in out
    assert Config.load().providers["p"] == {"base_url": "https://new/v1"}


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "ftp://h/v1", "http://", "localhost"])
def test_provider_bad_url_refused(orch, home, url):
    err = orch("provider", "add", "p", "--base-url", url, ok=False).stderr
    assert "http:// or https://" in err
    assert config_text(home) == ""


@pytest.mark.parametrize("flag", ["--input-cost-per-mtok", "--output-cost-per-mtok"])
def test_provider_lone_cost_flag_refused(orch, home, flag):
    err = orch("provider", "add", "p", "--base-url", "http://h/v1", flag, "1", ok=False).stderr
    assert "both" in err
    assert config_text(home) == ""


def test_provider_negative_cost_refused(orch):
    orch("provider", "add", "p", "--base-url", "http://h/v1", "--input-cost-per-mtok", "-1",
         "--output-cost-per-mtok", "1", ok=False)


@pytest.mark.parametrize("pid", ["local", "openai", "anthropic", "Ollama", "a/b", "a@b", ".x", "my provider"])
def test_provider_reserved_or_odd_id_refused(orch, home, pid):
    orch("provider", "add", pid, "--base-url", "http://h/v1", ok=False)
    assert config_text(home) == ""


@pytest.mark.parametrize("value", [
    FAKE_KEY,
    "sk-ant-api03-abcdefghijklmnop",
    "AIzaSyD4abcdefghijklmnopqrstuvwxyz01234",
    "gsk_abcdefghijklmnopqrstuvwxyz0123456789",
    "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
    "Zx9QwErTy123456789abcdefQWERTY",
])
def test_provider_key_as_api_key_env_refused_and_never_echoed(orch, home, value):
    result = orch("provider", "add", "p", "--base-url", "http://h/v1", "--api-key-env", value,
                  ok=False)
    assert "NAME of an environment variable" in result.stderr
    assert "P_API_KEY" in result.stderr  # suggests a name to export
    assert value not in result.output
    assert value not in config_text(home)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "my_company_api_key", "$TG_KEY"])
def test_provider_env_var_names_accepted(orch, name):
    orch("provider", "add", "p", "--base-url", "http://h/v1", "--api-key-env", name)
    assert Config.load().providers["p"]["api_key_env"] == name.lstrip("$")


def test_provider_remove_missing_is_one_line_error(orch):
    err = orch("provider", "remove", "nope", ok=False).stderr
    assert "no provider 'nope'" in err


# --------------------------------------------------------------------------- alias


def test_alias_set_list_remove(orch):
    orch("provider", "add", "myvllm", "--base-url", "http://h/v1")
    assert "alias fast" in orch("alias", "set", "fast", "myvllm/qwen3-8b").stdout
    orch("alias", "set", "wild", "fast@hot")
    assert Config.load().aliases == {"fast": "myvllm/qwen3-8b", "wild": "fast@hot"}

    assert "wild" in orch("alias", "list").stdout
    listed = json.loads(orch("alias", "list", "--json").stdout)
    assert listed == [
        {"name": "fast", "model": "myvllm/qwen3-8b", "resolves_to": "myvllm/qwen3-8b"},
        {"name": "wild", "model": "fast@hot", "resolves_to": "myvllm/qwen3-8b@hot"},
    ]

    out = orch("alias", "set", "fast", "openai/gpt-4o-mini").stdout
    assert "replaced alias fast" in out

    orch("alias", "remove", "wild")
    assert Config.load().aliases == {"fast": "openai/gpt-4o-mini"}
    assert "no alias 'wild'" in orch("alias", "remove", "wild", ok=False).stderr


def test_alias_loop_refused(orch):
    orch("alias", "set", "a", "openai/gpt-4o-mini")
    orch("alias", "set", "b", "a")
    err = orch("alias", "set", "a", "b", ok=False).stderr
    assert "loop" in err
    assert Config.load().aliases == {"a": "openai/gpt-4o-mini", "b": "a"}
    assert "loop" in orch("alias", "set", "self", "self@hot", ok=False).stderr


@pytest.mark.parametrize("name", ["a/b", "a@hot", "a,b"])
def test_alias_name_with_separators_refused(orch, name):
    orch("alias", "set", name, "openai/gpt-4o-mini", ok=False)
    assert Config.load().aliases == {}


def test_alias_to_unresolvable_target_refused(orch):
    orch("alias", "set", "x", "gpt4", ok=False)
    orch("alias", "set", "x", "openai/gpt-4o@lukewarm", ok=False)
    assert Config.load().aliases == {}


# --------------------------------------------------------------------------- council


def test_council_save_list_remove(orch):
    orch("alias", "set", "fast", "openai/gpt-4o-mini")
    out = orch("council", "save", "review", "--models", "fast, anthropic/claude-3-5-haiku,fast@hot")
    assert "saved council review" in out.stdout
    assert Config.load().councils == {
        "review": ["fast", "anthropic/claude-3-5-haiku", "fast@hot"]}

    assert "review" in orch("council", "list").stdout
    assert json.loads(orch("council", "list", "--json").stdout) == [
        {"name": "review", "models": ["fast", "anthropic/claude-3-5-haiku", "fast@hot"]}]

    out = orch("council", "save", "review", "--models", "fast,openai/gpt-4o").stdout
    assert "replaced council review" in out

    orch("council", "remove", "review")
    assert Config.load().councils == {}
    assert json.loads(orch("council", "list", "--json").stdout) == []
    assert "no council 'review'" in orch("council", "remove", "review", ok=False).stderr


@pytest.mark.parametrize("models", [
    "openai/gpt-4o-mini,nonsense",  # no provider, no such alias
    "openai/gpt-4o-mini,openai/gpt-4o@lukewarm",  # unknown variant
    "openai/gpt-4o-mini",  # fewer than two
    "openai/gpt-4o-mini,openai/gpt-4o-mini",  # same model twice
])
def test_council_save_bad_models_refused(orch, home, models):
    orch("council", "save", "r", "--models", models, ok=False)
    assert config_text(home) == ""


def test_council_save_compares_models_after_aliases_expand(orch, home):
    orch("alias", "set", "fast", "openai/gpt-4o-mini")
    result = orch("council", "save", "r", "--models", "fast,openai/gpt-4o-mini", ok=False)
    assert "openai/gpt-4o-mini listed twice" in result.stderr
    assert Config.load().councils == {}


def test_every_command_has_help_with_example(orch):
    for args in (["provider"], ["provider", "add"], ["provider", "list"], ["provider", "remove"],
                 ["alias"], ["alias", "set"], ["alias", "list"], ["alias", "remove"],
                 ["council"], ["council", "save"], ["council", "list"], ["council", "remove"]):
        out = orch(*args, "--help").stdout
        assert "orch " + args[0] in out.split("Example", 1)[-1], args
