"""`orch models`: aliases, declared providers' models (from /models, cached 24 h), local models
and litellm's catalogue for providers whose key is set; the --json contract."""

from __future__ import annotations

import json

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

KEY = "sk-models-test-abcdef0123456789"


def models(*args: str, **env: str):
    return CliRunner(env=env or None).invoke(cli, ["models", *args])


def by_name(result) -> dict[str, dict]:
    assert result.exit_code == 0, result.output
    return {r["name"]: r for r in json.loads(result.stdout)["models"]}


def probes(server) -> int:
    return sum(1 for r in server.requests if r.path == "/v1/models")


def test_every_addressable_model_with_what_orch_knows(orch, scripted_server, monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    scripted_server.script("qwen3-32b", Reply(text="x"))
    scripted_server.script("qwen3-0.6b", Reply(text="x"))
    orch.provider("lab", input_cost_per_mtok=0.5, output_cost_per_mtok=1.5,
                  max_output_tokens=4096, context_window=32768, supports_reasoning=True)
    orch.config(aliases={"fast": "lab/qwen3-0.6b@cold"}, variants={"cold": {"temperature": 0}})
    found = by_name(models("--json"))
    big = found["lab/qwen3-32b"]
    assert big == {"name": "lab/qwen3-32b", "source": "provider", "resolves_to": "lab/qwen3-32b",
                   "provider": "lab", "tier": "default", "context_window": 32768,
                   "max_output_tokens": 4096, "input_cost_per_mtok": 0.5,
                   "output_cost_per_mtok": 1.5, "cost_source": "declared", "tools": None,
                   "reasoning": True, "variants": []}
    assert found["lab/qwen3-0.6b"]["tier"] == "minimal"  # by its name: 0.6B parameters
    assert found["lab/qwen3-0.6b"]["variants"] == ["cold"]
    assert found["fast"]["source"] == "alias" and found["fast"]["target"] == "lab/qwen3-0.6b@cold"
    assert found["fast"]["resolves_to"] == "lab/qwen3-0.6b@cold"
    assert found["local/gemma3-270m"]["cost_source"] == "free"
    assert found["local/gemma3-270m"]["context_window"] == 8192  # the server's n_ctx (local.n_ctx, per slot)
    assert not [n for n in found if n.startswith("openai/")]  # no key, no catalogue
    assert set(json.loads(models("--json").stdout)["providers"]) == {"lab"}


def test_the_provider_list_is_cached_24h_and_refresh_asks_again(orch, scripted_server):
    scripted_server.script("m", Reply(text="x"))
    orch.provider("lab")
    models("--json")
    models("--json")
    assert probes(scripted_server) == 1
    models("--json", "--refresh")
    assert probes(scripted_server) == 2
    cache = json.loads((orch.home / "cache" / "models.json").read_text())
    assert cache["lab"]["models"] == ["m"]
    cache["lab"]["fetched_at"] -= 25 * 3600  # a day old: asked again
    (orch.home / "cache" / "models.json").write_text(json.dumps(cache))
    models("--json")
    assert probes(scripted_server) == 3


def test_an_unreachable_provider_shows_its_stale_list_with_a_note(orch, scripted_server):
    scripted_server.script("m", Reply(text="x"))
    orch.provider("lab")
    models("--json")
    cache = json.loads((orch.home / "cache" / "models.json").read_text())
    cache["lab"]["fetched_at"] = 0
    (orch.home / "cache" / "models.json").write_text(json.dumps(cache))
    scripted_server.stop()
    result = models()
    assert result.exit_code == 0
    assert "lab/m" in result.stdout
    assert "note: provider lab did not answer GET /models (its cached list is shown)" in \
        result.stderr


def test_litellm_models_appear_when_their_key_is_set_and_no_key_is_shown(orch_home,
                                                                         monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = models("gpt-4o-mini", "--json")
    found = by_name(result)
    row = found["openai/gpt-4o-mini"]
    assert row["source"] == "litellm" and row["cost_source"] == "litellm"
    assert row["input_cost_per_mtok"] > 0 and row["tools"] is True
    assert all("gpt-4o-mini" in n for n in found)
    assert KEY not in result.output
    globbed = by_name(models("openai/gpt-4o-mini-2024*", "--json"))
    assert list(globbed) == ["openai/gpt-4o-mini-2024-07-18"]
    human = models("gpt-4o-mini")
    assert human.stdout.splitlines()[0].split()[:3] == ["NAME", "TIER", "WINDOW"]
    assert KEY not in human.output


def test_a_pattern_matching_nothing(orch_home):
    result = models("no-such-model-anywhere")
    assert result.exit_code == 0 and result.stdout == "no models match\n"
