"""A declared endpoint's cost is orch's to work out (its declared prices, else ``unknown``):
litellm is told the per-token prices so its calculator does not search its price map for a
name it cannot know. Nothing changes on the wire, in litellm's price map, or in the record."""

from __future__ import annotations

import pytest

from orchestrator.testing.scripted_server import Reply

LITELLM_PARAMS = ("input_cost_per_token", "output_cost_per_token")


@pytest.fixture
def cost_misses(monkeypatch):
    """How often litellm formatted a traceback for a price it could not find."""
    from orchestrator.runtime import litellm

    litellm()
    from litellm.litellm_core_utils import litellm_logging

    calls: list[str] = []
    real = litellm_logging._get_traceback_str_for_error

    def counted(error: str) -> str:
        calls.append(error)
        return real(error)

    monkeypatch.setattr(litellm_logging, "_get_traceback_str_for_error", counted)
    return calls


def test_an_unpriced_endpoint_stays_unknown_and_litellm_never_misses(orch, scripted_server,
                                                                      cost_misses):
    from orchestrator.runtime import litellm

    orch.provider()
    scripted_server.script("mystery-7b", Reply(text="one", usage={"prompt_tokens": 120, "completion_tokens": 30}))
    run = orch.run_leg("mystery-7b")
    assert run.leg["status"] == "complete"
    assert run.leg["cost_usd"] is None and run.leg["cost_source"] == "unknown"
    assert cost_misses == []  # before: one formatted traceback per answer
    body = scripted_server.requests_for("mystery-7b")[0].body
    assert not set(LITELLM_PARAMS) & set(body), body  # litellm's own parameters stay home
    assert not [k for k in litellm().model_cost if "mystery-7b" in k]  # no price registered


def test_a_priced_endpoint_is_billed_at_its_declared_prices(orch, scripted_server,
                                                            cost_misses):
    orch.provider(input_cost_per_mtok=2.0, output_cost_per_mtok=8.0)
    scripted_server.script("house-model", Reply(text="two", usage={"prompt_tokens": 1_000, "completion_tokens": 500}))
    run = orch.run_leg("house-model")
    assert run.leg["cost_source"] == "declared"
    assert run.leg["cost_usd"] == pytest.approx((1_000 * 2.0 + 500 * 8.0) / 1_000_000)
    assert cost_misses == []
    assert not set(LITELLM_PARAMS) & set(scripted_server.requests_for("house-model")[0].body)


def test_a_litellm_model_keeps_litellm_pricing(monkeypatch):
    """A model orch reaches by litellm's own name is priced by litellm's map: no prices are
    passed for it (they would override the map)."""
    from orchestrator.models.addressing import ResolvedModel
    from orchestrator.models.server import litellm_prices

    assert litellm_prices(ResolvedModel(name="openai/gpt-4o-mini", provider="openai",
                                        litellm_model="openai/gpt-4o-mini")) == {}
    declared = ResolvedModel(name="x/y", provider="x", litellm_model="openai/y", declared=True)
    assert litellm_prices(declared) == {"input_cost_per_token": 0.0,
                                        "output_cost_per_token": 0.0}
