"""orch's table of what litellm reads and requires (models/key_names.py) against litellm's
own answers: a litellm upgrade that changes them fails here, not at a user's run."""

from __future__ import annotations

import pytest

from orchestrator.models import key_names


@pytest.fixture(scope="module")
def litellm_check():
    """litellm's validate_environment, run against a given environment (names only)."""
    import types

    from orchestrator.runtime import litellm

    real = litellm().validate_environment

    def check(provider: str, environ: dict[str, str]) -> list[str]:
        scope = dict(real.__globals__, os=types.SimpleNamespace(environ=environ))
        probe = types.FunctionType(real.__code__, scope, real.__name__, real.__defaults__,
                                   real.__closure__)
        probe.__kwdefaults__ = real.__kwdefaults__
        return list(probe(model=f"{provider}/some-model").get("missing_keys") or [])

    return check


def test_the_provider_list_is_litellms():
    from orchestrator.runtime import litellm

    theirs = {str(getattr(p, "value", p)) for p in litellm().provider_list}
    assert theirs == set(key_names.LITELLM_PROVIDERS), (
        "litellm's providers changed: regenerate LITELLM_PROVIDERS",
        sorted(theirs ^ set(key_names.LITELLM_PROVIDERS)))


def test_every_variable_litellm_checks_is_read(litellm_check):
    for provider, names in key_names.LITELLM_KEYS.items():
        assert set(litellm_check(provider, {})) <= set(names), provider


def test_orchs_verdict_is_litellms_for_every_environment_that_matters(litellm_check):
    """For each provider of the table: nothing set, each name alone, all of them, and all
    but each one: missing or not, as litellm says."""
    checked = 0
    for provider, names in key_names.LITELLM_KEYS.items():
        everything = sorted({*names, *litellm_check(provider, {})})
        envs = [{}, dict.fromkeys(everything, "v")]
        envs += [{n: "v"} for n in everything]
        envs += [{m: "v" for m in everything if m != n} for n in everything]
        for env in envs:
            theirs = litellm_check(provider, env)
            ours = key_names.missing(provider, env)
            assert bool(ours) == bool(theirs), (provider, sorted(env), ours, theirs)
            if theirs:
                assert set(ours) == set(theirs), (provider, sorted(env))
            checked += 1
    assert checked > 100


def test_the_call_carries_what_litellm_would_read():
    assert key_names.call_kwargs("openai", {"OPENAI_API_KEY": "k"}) == {"api_key": "k"}
    assert key_names.call_kwargs("gemini", {"GOOGLE_API_KEY": "g"}) == {"api_key": "g"}
    assert key_names.call_kwargs("bedrock", {
        "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION_NAME": "r"}) == {
        "aws_access_key_id": "a", "aws_secret_access_key": "s", "aws_region_name": "r"}
    assert key_names.call_kwargs("azure", {"AZURE_API_KEY": "k", "AZURE_API_BASE": "b",
                                           "AZURE_API_VERSION": "v"}) == {
        "api_key": "k", "api_base": "b", "api_version": "v"}
    assert key_names.call_kwargs("openai", {}) == {}
