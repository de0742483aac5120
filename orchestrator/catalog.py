"""What a model can do and how big it is: litellm's model metadata, overridden by what a
declared provider says. Never guessed: unknown stays None."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from orchestrator.models import ResolvedModel


@dataclass(frozen=True)
class ModelInfo:
    context_window: int | None = None  # max input tokens (or total window where that is all)
    max_output_tokens: int | None = None
    supports_tools: bool | None = None
    supports_reasoning: bool | None = None
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None


@functools.lru_cache(maxsize=512)
def _litellm_info(litellm_model: str) -> ModelInfo:
    from orchestrator.runtime import litellm

    lm = litellm()
    try:
        info = lm.get_model_info(litellm_model)
    except Exception:
        return ModelInfo()

    def flag(name: str) -> bool | None:
        value = info.get(name)
        return None if value is None else bool(value)

    return ModelInfo(
        context_window=info.get("max_input_tokens") or info.get("max_tokens"),
        max_output_tokens=info.get("max_output_tokens"),
        supports_tools=flag("supports_function_calling"),
        supports_reasoning=flag("supports_reasoning"),
        input_cost_per_token=info.get("input_cost_per_token"),
        output_cost_per_token=info.get("output_cost_per_token"),
    )


def model_info(model: ResolvedModel, declared: dict | None = None) -> ModelInfo:
    """litellm's metadata for ``model`` (none for declared endpoints, whose names may
    collide with catalogue names), with the provider's declared values on top."""
    base = ModelInfo() if model.declared else _litellm_info(model.litellm_model)
    declared = declared or {}
    return ModelInfo(
        context_window=declared.get("context_window") or base.context_window,
        max_output_tokens=(declared.get("max_output_tokens") or model.max_output_tokens
                           or base.max_output_tokens),
        supports_tools=declared.get("supports_tools", base.supports_tools),
        supports_reasoning=declared.get("supports_reasoning", base.supports_reasoning),
        input_cost_per_token=base.input_cost_per_token,
        output_cost_per_token=base.output_cost_per_token,
    )
