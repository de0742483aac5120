"""Key values never reach what orch writes."""

import os

from orchestrator.security.secrets import scrub, scrub_values, secret_values
from orchestrator.store import JsonlFile, write_json_atomic


def test_scrub_replaces_env_secret_values_and_key_shapes(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "abc123-very-secret")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "dvorak-programmer")
    assert "abc123-very-secret" in secret_values()
    assert "dvorak-programmer" not in secret_values()
    text = "key abc123-very-secret and sk-proj-0123456789abcdef in a task-list"
    assert scrub(text) == "key *** and *** in a task-list"


def test_store_writes_are_scrubbed(monkeypatch, tmp_path):
    monkeypatch.setenv("X_TOKEN", "tok-9f8e7d6c5b4a")
    write_json_atomic(tmp_path / "a.json", {"answer": "the token is tok-9f8e7d6c5b4a"})
    conversation = JsonlFile(tmp_path / "b.jsonl")
    conversation.append({"messages": ["tok-9f8e7d6c5b4a"]})
    conversation.close()
    for name in ("a.json", "b.jsonl"):
        text = (tmp_path / name).read_text()
        assert "tok-9f8e7d6c5b4a" not in text and "***" in text


# -- the registry ---------------------------------------------------------------------------

def test_unusual_variable_names_are_registered(monkeypatch):
    from orchestrator.security.secrets import source_of

    for name in ("ACME_KEY_PROD", "OPENROUTER_AUTH", "TOGETHER_APIKEY", "OPENAI_API_KEY_2"):
        monkeypatch.setenv(name, f"value-of-{name.lower()}-123")
        assert f"value-of-{name.lower()}-123" in secret_values()
        assert scrub(f"x value-of-{name.lower()}-123 y") == "x *** y"
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock.1234")
    assert "/tmp/ssh-agent.sock.1234" not in secret_values()
    assert source_of("value-of-acme_key_prod-123") == "$ACME_KEY_PROD"


def test_a_value_read_to_be_sent_is_registered_whatever_its_name(monkeypatch):
    from orchestrator.models.addressing import ResolvedModel

    monkeypatch.setenv("PLAIN_NAME", "q8Zr-plain-but-sent-4711")
    assert scrub("q8Zr-plain-but-sent-4711") == "q8Zr-plain-but-sent-4711"  # not yet read
    model = ResolvedModel(name="acme/m", provider="acme", litellm_model="openai/m",
                          api_base="http://127.0.0.1:9/v1", api_key_env="PLAIN_NAME",
                          declared=True)
    assert model.api_key() == "q8Zr-plain-but-sent-4711"
    assert scrub("echo: Bearer q8Zr-plain-but-sent-4711") == "echo: Bearer ***"


def test_litellm_provider_variables_are_registered_by_name_litellm_reads(monkeypatch):
    from orchestrator.models.addressing import ResolvedModel, register_litellm_keys

    monkeypatch.setenv("OPENAI_API_KEY", "litellm-reads-this-one-99")
    register_litellm_keys(ResolvedModel(name="openai/gpt-4o-mini", provider="openai",
                                        litellm_model="openai/gpt-4o-mini"))
    from orchestrator.models.key_names import model_names

    assert model_names(ResolvedModel(name="openai/gpt-4o-mini", provider="openai",
                                     litellm_model="openai/gpt-4o-mini")) == ("OPENAI_API_KEY",)
    assert os.environ["OPENAI_API_KEY"] == "litellm-reads-this-one-99"  # environment restored
    assert scrub_values("litellm-reads-this-one-99") == "***"


def test_learning_litellm_names_never_swaps_the_process_environment(monkeypatch):
    """The daemon resolves models for many jobs at once on threads of one process: learning
    which variables litellm reads must never hide the environment from another thread (nor,
    restored out of order, leave it empty for good)."""
    import sys
    import threading

    from orchestrator.models import addressing as models
    from orchestrator.models.addressing import ResolvedModel, register_litellm_keys

    monkeypatch.setenv("ORCH_RACE_PROBE", "still-here")
    monkeypatch.setenv("OPENAI_API_KEY", "race-openai-value-8181")
    environ = os.environ
    providers = ("openai", "anthropic", "groq", "mistral", "deepseek", "cohere", "xai")
    blind: list[object] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            if os.environ.get("ORCH_RACE_PROBE") != "still-here":
                blind.append(type(os.environ).__name__)

    def resolver(n: int) -> None:
        for i in range(40):
            provider = providers[(n + i) % len(providers)]
            register_litellm_keys(ResolvedModel(name=f"{provider}/m-{n}-{i}", provider=provider,
                                                litellm_model=f"{provider}/m-{n}-{i}"))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        watch = threading.Thread(target=reader)
        watch.start()
        workers = [threading.Thread(target=resolver, args=(n,)) for n in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        watch.join()
    finally:
        sys.setswitchinterval(interval)
        left = os.environ
        os.environ = environ  # noqa: B003  # (the old swap's worst case: back for the rest)
    assert left is environ
    assert blind == []
    assert models.register_litellm_keys is register_litellm_keys
    from orchestrator.security.secrets import scrub_values

    assert scrub_values("race-openai-value-8181") == "***"  # registered by name, by every thread
    assert scrub_values("race-openai-value-8181") == "***"  # still registered, never written


def test_headers_and_url_credentials_are_registered():
    from orchestrator.security.secrets import register_headers, register_url

    register_headers({"Authorization": "Bearer hdr-token-5566778899", "X-Trace": "t-1"})
    register_url("https://user:url-pass-112233@gw.example/v1?api_key=url-key-445566")
    text = "hdr-token-5566778899 url-pass-112233 url-key-445566 gw.example"
    assert scrub_values(text) == "*** *** *** gw.example"


def test_key_shapes_are_masked_in_free_text_but_never_in_identifiers():
    from orchestrator.models.addressing import ResolvedModel
    from orchestrator.security.secrets import scrub_doc

    key = "sk-proj-0123456789abcdefABCDEF"
    ResolvedModel(name="dead/sk-mixtral-8x7b-instruct-v0.1-0123456789", provider="dead",
                  litellm_model="openai/sk-mixtral-8x7b-instruct-v0.1-0123456789",
                  api_base="http://ak-gateway-01.internal:8000/v1")  # names orch uses
    assert scrub(f"the key is {key}.") == "the key is ***."
    assert scrub("model sk-mixtral-8x7b-instruct-v0.1-0123456789 failed") == \
        "model sk-mixtral-8x7b-instruct-v0.1-0123456789 failed"
    assert scrub("http://ak-gateway-01.internal:8000/v1 and ak-gateway-01") == \
        "http://ak-gateway-01.internal:8000/v1 and ak-gateway-01"
    assert scrub(f"/runs/{key}/x") == f"/runs/{key}/x"  # a path segment is not a key
    doc = scrub_doc({"model": f"x/{key}", "models": [key], "answer": key, "base_url": key,
                     "notes": [key]})
    assert doc == {"model": f"x/{key}", "models": [key], "answer": "***", "base_url": key,
                   "notes": ["***"]}


def test_config_json_never_goes_through_the_shape_scrubber(orch_home):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    url = "http://ak-gateway-0123456789abcdef01.internal:8000/v1"
    result = CliRunner().invoke(cli, ["provider", "add", "sk-lab-0123456789abcdef0123",
                                      "--base-url", url])
    assert result.exit_code == 0, result.output
    text = (orch_home / "config.json").read_text()
    assert url in text and "sk-lab-0123456789abcdef0123" in text and "***" not in text
    listed = CliRunner().invoke(cli, ["provider", "list"]).stdout
    assert url in listed


def test_stdout_masks_an_answer_that_echoes_a_key_shape(orch, scripted_server):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider()
    scripted_server.script("m", "here: sk-live-0123456789abcdefABCDEF01")
    for extra in ((), ("--json",)):
        result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "-q",
                                          "--tools", "none", *extra])
        assert "here: ***" in result.stdout and "0123456789abcdefABCDEF01" not in result.stdout
