"""`orch doctor` against the scripted server: one healthy provider, one unreachable, one
without its key and one undeclared variant; the rows, the exit code, no key value anywhere."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner
from test_plugins_loading import site  # noqa: F401 - its fixture: test plugins on sys.path

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

SECRET = "sk-doctor-test-0123456789abcdef"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when we leave: nothing listens there


def doctor(*args: str):
    return CliRunner().invoke(cli, ["doctor", *args])


def rows(result) -> dict[tuple[str, str], dict]:
    return {(r["section"], r["check"]): r for r in json.loads(result.stdout)["checks"]}


def four_providers(orch, scripted_server, monkeypatch):
    scripted_server.script("m", Reply(text="hi"))
    monkeypatch.delenv("ORCH_TEST_LOCKED_KEY", raising=False)
    monkeypatch.setenv("ORCH_TEST_KEY", SECRET)
    orch.provider("good")
    orch.provider("keyed", api_key_env="ORCH_TEST_KEY")
    orch.provider("locked", api_key_env="ORCH_TEST_LOCKED_KEY")
    orch.config(providers={"down": {"base_url": f"http://127.0.0.1:{closed_port()}/v1"}},
                variants={"deep": {"reasoning_effort": "high"}},
                aliases={"think": "good/m@deep", "plain": "good/m"})


def test_the_four_rows_are_as_specified_and_a_fail_exits_1(orch, scripted_server, monkeypatch):
    four_providers(orch, scripted_server, monkeypatch)
    result = doctor("--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["counts"]["fail"] == 3
    got = rows(result)
    healthy = got[("provider good", "endpoint")]
    assert healthy["status"] == "ok" and healthy["detail"] == "answers; lists 1 model(s): m"
    assert got[("provider good", "key")]["status"] == "ok"
    down = got[("provider down", "endpoint")]
    assert down["status"] == "fail" and "unreachable (ConnectionRefusedError)" in down["detail"]
    assert down["fix"].startswith("start the server at http://127.0.0.1:")
    locked = got[("provider locked", "key")]
    assert locked == {"section": "provider locked", "check": "key", "status": "fail",
                      "detail": "$ORCH_TEST_LOCKED_KEY is not set",
                      "fix": "export ORCH_TEST_LOCKED_KEY=... (the key for locked)"}
    variant = got[("alias think", "@deep")]
    assert variant["status"] == "fail" and variant["code"] == "VARIANT_UNDECLARED"
    assert "good/m does not declare reasoning support" in variant["detail"]
    assert got[("alias plain", "plain")]["detail"] == "resolves to good/m"
    assert got[("provider keyed", "key")]["detail"] == "$ORCH_TEST_KEY is set"
    # the probe carried the key (on the wire), yet no output shows it
    auth = [r.headers.get("authorization") for r in scripted_server.requests
            if r.path == "/v1/models"]
    assert f"Bearer {SECRET}" in auth
    assert SECRET not in result.output


def test_the_human_table_names_each_fix_and_shows_no_key(orch, scripted_server, monkeypatch):
    four_providers(orch, scripted_server, monkeypatch)
    result = doctor()
    assert result.exit_code == 1
    out = result.stdout
    assert "  FAIL  key: $ORCH_TEST_LOCKED_KEY is not set" in out
    assert "          fix: export ORCH_TEST_LOCKED_KEY=... (the key for locked)" in out
    assert "  FAIL  @deep: VARIANT_UNDECLARED: good/m@deep: the variant asks for thinking" in out
    assert out.rstrip().endswith("3 fail")
    assert SECRET not in result.output


def test_a_healthy_set_up_exits_0(orch, scripted_server):
    orch.provider("good", max_output_tokens=1000)
    orch.config(variants={"short": {"max_tokens": 500}}, aliases={"brief": "good/m@short"},
                councils={"pair": ["good/a", "good/b"]})
    scripted_server.script("a", Reply(text="x"))
    scripted_server.script("b", Reply(text="x"))
    scripted_server.script("m", Reply(text="x"))
    result = doctor("--json")
    assert result.exit_code == 0, result.output
    got = rows(result)
    assert got[("council pair", "good/a")]["status"] == "ok"
    assert ("alias brief", "@short") not in got  # 500 fits the 1000 ceiling: no row


def test_a_variant_over_the_output_ceiling(orch, scripted_server):
    orch.provider("good", max_output_tokens=1000)
    orch.config(variants={"long": {"max_tokens": 4000}}, aliases={"essay": "good/m@long"})
    row = rows(doctor("--json"))[("alias essay", "@long")]
    assert row["status"] == "fail" and row["code"] == "VARIANT_OVER_BUDGET"
    assert row["fix"] == "lower max_tokens in variants.long to 1000 or less"


def test_config_problems_are_key_paths_and_typos_in_plugin_settings_are_rows(orch_home):
    (orch_home / "config.json").write_text(json.dumps({
        "providers": {"x": {"base_url": 5}}, "aliases": {"a": ["not", "a", "string"]},
        "plugins": {"disabled": ["wordcont"]}, "plugin_config": {"tires": {}},
        "provders": {}}))
    result = doctor("--json")
    assert result.exit_code == 1
    got = rows(result)
    assert got[("environment", "config providers.x.base_url")]["detail"] == \
        "5 is not of type 'string'"
    assert got[("environment", "config aliases.a")]["status"] == "fail"
    assert got[("environment", "config provders")]["status"] == "warn"
    settings = [r["detail"] for r in json.loads(result.stdout)["checks"]
                if r["check"] == "settings"]
    assert settings == ["'wordcont' is named in the plugin settings but matches no installed "
                        "plugin", "plugin_config.tires matches no installed plugin"]


def test_invalid_json_config_is_one_fail_row_not_a_traceback(orch_home):
    (orch_home / "config.json").write_text("{nope")
    result = doctor()
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "FAIL  config.json: config file" in result.stdout and "not valid JSON" in result.stdout


def test_a_broken_ledger_fails(orch_home):
    (orch_home / "ledger.db").write_bytes(b"this is not sqlite" * 100)
    row = rows(doctor("--json"))[("environment", "ledger")]
    assert row["status"] == "fail" and "does not open" in row["detail"]


def test_sections_of_the_wrong_type_are_rows_and_the_rest_still_runs(orch_home):
    (orch_home / "config.json").write_text(json.dumps({
        "providers": [], "aliases": 3, "councils": "x", "plugins": [], "plugin_config": [],
        "variants": [], "local": 5}))
    result = doctor("--json")
    assert result.exit_code == 1, result.output
    failed = {r["check"] for r in json.loads(result.stdout)["checks"] if r["status"] == "fail"}
    assert failed == {f"config {s}" for s in ("providers", "aliases", "councils", "plugins",
                                              "plugin_config", "variants", "local")}


@pytest.fixture
def local_home(orch_home, tmp_path):
    """The built-in alias on a small stand-in file, served by test_local's fake server."""
    import os
    import signal

    from test_local import FAKE_SERVER, fake_gguf, supervisors, write_config

    from orchestrator.local import manager

    write_config(orch_home, models={"gemma3-270m": fake_gguf(tmp_path / "tiny.gguf")},
                 server_command=["{python}", "-c", FAKE_SERVER, "{port}", "gemma3-270m"])
    yield orch_home
    manager.stop()
    for pid in supervisors(orch_home):
        os.kill(pid, signal.SIGKILL)


def test_deep_generates_one_token_on_the_managed_server(local_home):
    result = doctor("--json", "--deep")
    got = rows(result)
    assert got[("local", "deep")]["status"] == "ok", got[("local", "deep")]
    assert got[("local", "deep")]["detail"].startswith("local/gemma3-270m generated a token")
    assert got[("local", "local/gemma3-270m")]["detail"].endswith("sha256 matches")


def test_a_local_model_whose_file_changed_fails_its_digest(local_home, tmp_path):
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF swapped")
    row = rows(doctor("--json"))[("local", "local/gemma3-270m")]
    assert row["status"] == "fail" and "fails its sha256 check" in row["detail"]


def test_a_broken_plugin_fails_and_a_typo_hook_warns(orch_home, site):  # noqa: F811
    site.install("orch-test-bad", "1.0", {"bad": "import requests_oauthlib_missing\n",
                                          "typo": TYPO_PLUGIN})
    result = doctor("--json")
    assert result.exit_code == 1
    got = rows(result)
    bad = got[("plugins", "bad")]
    assert bad["status"] == "fail"
    assert bad["detail"] == ("ModuleNotFoundError: No module named "
                             "'requests_oauthlib_missing'")
    assert bad["fix"] == "fix or uninstall orch-test-bad, or ORCH_DISABLE_PLUGINS=bad"
    typo = [r for r in json.loads(result.stdout)["checks"]
            if r["check"] == "typo" and r["status"] == "warn"]
    assert [r["detail"] for r in typo] == [
        "hook implementation 'before_requets' matches no hook (typo?)"]
    assert CliRunner(env={"ORCH_DISABLE_PLUGINS": "bad"}).invoke(
        cli, ["doctor", "--json"]).exit_code == 0


TYPO_PLUGIN = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def before_requets(leg, request):
    return None
"""


def test_orch_home_that_is_a_file_fails_and_the_other_checks_still_run(tmp_path, monkeypatch):
    from orchestrator import runtime

    afile = tmp_path / "home"
    afile.write_text("not a directory")
    monkeypatch.setenv("ORCH_HOME", str(afile))
    runtime.config.cache_clear()
    result = doctor("--json")
    assert result.exit_code == 1 and "Traceback" not in result.output
    got = rows(result)
    assert got[("environment", "ORCH_HOME")]["detail"].endswith("is not a directory")
    assert got[("local", "check")]["detail"].startswith("could not run: NotADirectoryError")
    assert got[("plugins", "workspace")]["status"] == "ok"
