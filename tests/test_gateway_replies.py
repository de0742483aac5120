"""A LiteLLM proxy's own answers, replayed by the scripted server: cost headers and refusals.

The bodies and headers are the ones litellm 1.110.2's proxy sent in tests/test_gateway.py
(which runs the real proxy when the ``gateway`` extra is installed); here they run in every
install, through litellm's client, the shared server's failure naming and the rate gate.
"""

from __future__ import annotations

import pytest

from orchestrator.models import gate as gate_mod
from orchestrator.models.proxy import reported_cost
from orchestrator.testing.scripted_server import Reply

HASH = "502f8e35ed3efd7a7d727462c572a6e2e1edaa17175be954edf891669d07f457"
BUDGET = {"error": {
    "message": f"LiteLLM Virtual Key: {HASH}, key_alias: None, exceeded budget for model=deep",
    "type": "budget_exceeded", "param": None, "code": "422"}}
NOT_ALLOWED = {"error": {
    "message": "The requested model 'fast' is not available for this API key, or the model "
               "name is invalid. Check the models available to you and try again.",
    "type": "key_model_access_denied", "param": "model", "code": "403"}}
TEAM_NOT_ALLOWED = {"error": {**NOT_ALLOWED["error"], "type": "team_model_access_denied"}}
# What the proxy sends with a priced answer (x-litellm-response-cost and its parts).
COST_HEADERS = {"x-litellm-response-cost": "1.1e-05", "x-litellm-response-cost-input": "9e-06",
                "x-litellm-response-cost-output": "2e-06", "x-litellm-key-spend": "3.3e-05",
                "x-litellm-model-group": "deep"}


@pytest.fixture(autouse=True)
def fresh_gates():
    gate_mod.reset()
    yield
    gate_mod.reset()


@pytest.mark.parametrize(("status", "body", "reason"), [
    (422, BUDGET, "budget_exceeded"),
    (429, BUDGET, "budget_exceeded"),  # a team that sets budget_exceeded_status_code: 429
    (400, BUDGET, "budget_exceeded"),
    (403, NOT_ALLOWED, "model_not_allowed"),
    (401, TEAM_NOT_ALLOWED, "model_not_allowed"),
], ids=["budget-422", "budget-429", "budget-400", "key-403", "team-401"])
def test_a_gateway_refusal_is_named_and_never_retried(orch, scripted_server, status, body,
                                                      reason):
    orch.provider()
    scripted_server.script("m", Reply(status=status, error_body=body), Reply(text="too late"))
    run = orch.run_leg("m")
    assert scripted_server.count("m") == 1  # not retried: no wait fixes it
    leg = run.leg
    assert leg["status"] == "error" and leg["reason"].startswith(f"{reason}: ")
    assert leg["requests"] == 1
    if body is BUDGET:  # the proxy's words, but never the key's hash
        assert "exceeded budget for model=deep" in leg["reason"]
        assert HASH not in leg["reason"] and "<key hash>" in leg["reason"]
    assert not run.doc["server"]["rate_gate"]  # the gate held nothing


def test_the_gateways_rpm_429_is_ridden_out_with_its_wait(orch, scripted_server):
    orch.provider()
    rpm = {"error": {"message": "litellm.RateLimitError: Model rate limit exceeded. RPM "
                                "limit=4, current usage=5", "type": "throttling_error",
                     "param": None, "code": "429"}}
    scripted_server.script("m", Reply(status=429, error_body=rpm,
                                      headers={"llm_provider-retry-after": "1"}),
                           Reply(text="done"))
    run = orch.run_leg("m")
    assert run.leg["status"] == "complete" and run.leg["requests"] == 2
    first, second = scripted_server.requests_for("m")
    assert second.t_start - first.t_end >= 0.9  # the proxy's wait, not a 1 s-or-less backoff
    held = next(iter(run.doc["server"]["rate_gate"].values()))
    assert held["retries"] == 1


def test_the_gateways_cost_header_is_the_legs_reported_cost(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="a", headers=COST_HEADERS),
                           Reply(text="b", headers={**COST_HEADERS,
                                                    "x-litellm-response-cost": "2.5e-05"}))
    run = orch.run_wave(["m", "m"])
    costs = sorted(leg["cost_usd"] for leg in run.legs)
    assert costs == [pytest.approx(1.1e-05), pytest.approx(2.5e-05)]
    assert {leg["cost_source"] for leg in run.legs} == {"reported"}
    from orchestrator.ledger.spend import Ledger

    rows = Ledger().rows()
    assert sorted(r["cost_usd"] for r in rows) == costs
    assert {r["cost_source"] for r in rows} == {"reported"}


def test_the_header_wins_over_declared_prices_and_a_missing_one_changes_nothing(
        orch, scripted_server):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="a", headers=COST_HEADERS))
    assert orch.run_leg("m").leg["cost_source"] == "reported"
    scripted_server.script("m", Reply(text="a"))  # no header: the declared price, as before
    leg = orch.run_leg("m").leg
    assert leg["cost_source"] == "declared" and leg["cost_usd"] > 1e-3


def test_an_unpriced_gateway_model_stays_unknown(orch, scripted_server):
    """The proxy leaves the header out when it knows no price: the cost is not guessed."""
    orch.provider()
    scripted_server.script("m", Reply(text="a", headers={"x-litellm-key-spend": "0.0"}))
    leg = orch.run_leg("m").leg
    assert leg["cost_source"] == "unknown" and leg["cost_usd"] is None


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "lots", "", "1e300", "-0.5"])
def test_an_unusable_cost_header_is_never_a_cost(value):
    class Raw:
        _hidden_params = {"headers": {"x-litellm-response-cost": value}}

    assert reported_cost(Raw()) is None


def test_suspect_usage_is_not_laundered_by_a_header(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="a", headers=COST_HEADERS,
                                      usage={"prompt_tokens": -5, "completion_tokens": 3}))
    assert orch.run_leg("m").leg["cost_source"] == "suspect"


def test_a_422_naming_a_parameter_is_still_mended_and_resent(orch, scripted_server):
    """litellm drops what a validation error names and sends again (drop_params); only a
    422 naming nothing is no longer sent twice (orchestrator/models/litellm_patch.py)."""
    orch.provider()
    import json

    named = {"error": {"message": json.dumps({"detail": [
        {"loc": ["body", "temperature"], "msg": "not supported", "type": "extra_forbidden"}]})}}
    scripted_server.script("m", Reply(status=422, error_body=named), Reply(text="mended"))
    run = orch.run_leg("m@hot")  # the variant sends temperature
    assert run.leg["status"] == "complete" and run.leg["answer"] == "mended"
    first, second = run.bodies
    assert "temperature" in first and "temperature" not in second


def test_docs_team_md_shows_the_proxy_yaml_the_gateway_test_runs():
    """docs/team.md is a tested recipe: its proxy.yaml is examples/team/proxy.yaml, byte for
    byte, and its `orch provider add` line is the one tests/test_gateway.py runs."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "team.md").read_text()
    yaml = (root / "examples" / "team" / "proxy.yaml").read_text()
    assert f"```yaml\n{yaml}```" in doc
    assert ("orch provider add team --base-url http://gateway:4000/v1 --api-key-env "
            "ORCH_TEAM_KEY") in doc
    assert '"--api-key-env", "ORCH_TEAM_KEY"' in (root / "tests" / "test_gateway.py").read_text()


def test_a_refusal_that_echoes_the_key_is_masked(orch, scripted_server, monkeypatch):
    monkeypatch.setenv("ORCH_TEAM_KEY", "sk-team-q8Zr0123456789abcdef")
    orch.provider(api_key_env="ORCH_TEAM_KEY")
    echo = {"error": {"message": "key sk-team-q8Zr0123456789abcdef exceeded budget for "
                                 "model=deep", "type": "budget_exceeded", "code": "422"}}
    scripted_server.script("m", Reply(status=422, error_body=echo))
    run = orch.run_leg("m")
    assert run.leg["reason"] == "budget_exceeded: key *** exceeded budget for model=deep"


@pytest.mark.parametrize("body", [None, "", "<html>", [], {"error": "budget_exceeded"},
                                  {"error": {"type": ["budget_exceeded"]}},
                                  {"error": {"type": None, "message": 5}}])
def test_odd_error_bodies_are_no_refusal(body):
    from orchestrator.models.proxy import refusal

    assert refusal(body, "boom") is None
