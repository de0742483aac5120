"""When orch falls back to the local model: nothing chosen, nothing configured, no key set.

A fresh machine still runs a real wave; a machine with any provider key or declared provider
keeps the plain "no models given" error, since there the user has a real choice to make.
"""

from __future__ import annotations

from orchestrator.config import Config
from orchestrator.local.model import DEFAULT_MODEL

# The key variables litellm reads for the providers people most often have.
PROVIDER_KEYS = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHERAI_API_KEY", "TOGETHER_API_KEY",
    "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "COHERE_API_KEY",
    "FIREWORKS_AI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "PERPLEXITYAI_API_KEY",
    "HUGGINGFACE_API_KEY", "CEREBRAS_API_KEY", "DEEPINFRA_API_KEY", "AWS_ACCESS_KEY_ID",
)

NOTICE = (f"no models given and no provider key or provider configured: using the local "
          f"model {DEFAULT_MODEL} (a small base model; pass --models to choose)")


def provider_available(cfg: Config) -> bool:
    from orchestrator import keys

    return bool(cfg.providers) or any(keys.is_set(k) for k in PROVIDER_KEYS)


def default_models(cfg: Config) -> list[str] | None:
    """``[local/gemma3-270m]`` when orch has nothing else to run, else None."""
    return None if provider_available(cfg) else [DEFAULT_MODEL]
