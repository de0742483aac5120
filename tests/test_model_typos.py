"""A model-name typo fails fast at launch: exit 2, the closest names, no request sent; the same
name goes out with --no-validate-models; an unreachable list never blocks; a refresh that lists
fewer models never empties the cache without a word."""

from __future__ import annotations

import json
import socket

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def fanout(*args):
    return CliRunner().invoke(cli, ["fanout", *args, "--tools", "none"])


def test_a_typo_is_refused_with_a_suggestion_and_no_request(orch, scripted_server, orch_home):
    orch.provider()
    for name in ("no-such-model", "alpha", "beta"):
        scripted_server.script(name, Reply(text="hi"))
    result = fanout("-m", "scripted/no-such-model-typo", "-p", "hi")
    assert result.exit_code == 2, result.output
    assert scripted_server.count() == 0
    assert "did you mean scripted/no-such-model?" in result.stderr
    assert "scripted/no-such-model-typo is not among the 3 models scripted lists" in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    assert not (orch_home / "ledger.db").exists()
    # the same name, sent as given when asked
    sent = fanout("-m", "scripted/no-such-model-typo", "-p", "hi", "--no-validate-models")
    assert scripted_server.count("no-such-model-typo") == 1, sent.output


def test_a_model_loaded_after_the_cache_is_found_by_asking_again(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="A"))
    assert fanout("-m", "scripted/a", "-p", "hi").exit_code == 0
    scripted_server.script("b", Reply(text="B"))  # the server now lists b; the cache does not
    result = fanout("-m", "scripted/b", "-p", "hi")
    assert result.exit_code == 0, result.output


def test_a_chair_typo_is_refused_too(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="A"))
    scripted_server.script("judge", Reply(text="J"))
    result = fanout("-m", "scripted/a", "--chair", "scripted/jduge", "-p", "hi")
    assert result.exit_code == 2 and "did you mean scripted/judge?" in result.stderr
    assert scripted_server.count() == 0


def test_an_unreachable_list_never_blocks(orch, orch_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    orch.provider("gone", base_url=f"http://127.0.0.1:{port}/v1")
    result = fanout("-m", "gone/anything", "-p", "hi", "--timeout", "0.1")
    assert "unknown model" not in result.output  # it was sent (and failed to connect)
    assert result.exit_code == 1


def test_a_litellm_typo_is_refused_from_the_catalogue(orch, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    result = fanout("-m", "openai/gpt-4o-mnii", "-p", "hi")
    assert result.exit_code == 2
    assert "openai/gpt-4o-mnii is not in litellm's catalogue" in result.stderr
    assert "did you mean openai/gpt-4o-mini" in result.stderr


def test_a_refresh_listing_fewer_models_keeps_or_says(orch, scripted_server, orch_home):
    orch.provider()
    scripted_server.script("a", Reply(text="A"))
    scripted_server.script("b", Reply(text="B"))
    runner = CliRunner()
    assert runner.invoke(cli, ["models", "--refresh", "--json"]).exit_code == 0
    cache = orch_home / "cache" / "models.json"
    assert json.loads(cache.read_text())["scripted"]["models"] == ["a", "b"]
    scripted_server.reset()  # b is no longer listed
    scripted_server.script("a", Reply(text="A"))
    result = runner.invoke(cli, ["models", "--refresh", "--json"])
    assert "scripted now lists 1 models, 1 fewer than before: b" in result.stderr
    assert json.loads(cache.read_text())["scripted"]["models"] == ["a"]
    scripted_server.reset()  # lists nothing now
    result = runner.invoke(cli, ["models", "--refresh", "--json"])
    assert "scripted now lists no models (it listed 1); keeping the cached list" in result.stderr
    assert json.loads(cache.read_text())["scripted"]["models"] == ["a"]
