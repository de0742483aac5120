"""Which key variables a daemon job may ask its client for: the ones its models need.

The client computes the set itself, from the job's command line and config.json, before it
says anything: the key variable of each declared provider the job addresses, and litellm's
key names for each litellm provider it addresses. A daemon that asks for any other name
(``$GITHUB_TOKEN`` for a job on ``openai/...``) gets nothing. Standard library only: litellm's
names come from :data:`LITELLM_KEYS` (tests/test_serve_trust.py compares it with litellm's
own ``validate_environment``), so the client stays light.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

# litellm provider -> the key variables litellm reads for it (validate_environment's names).
LITELLM_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",), "text-completion-openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",), "codestral": ("CODESTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",), "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY",
                                               "TOGETHER_AI_TOKEN"),
    "openrouter": ("OPENROUTER_API_KEY", "OR_API_KEY"), "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",), "cohere": ("COHERE_API_KEY",), "cohere_chat": ("COHERE_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"),
    "cerebras": ("CEREBRAS_API_KEY",), "deepinfra": ("DEEPINFRA_API_KEY",),
    "azure": ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN"),
    "azure_ai": ("AZURE_AI_API_KEY", "AZURE_API_KEY"),
    "huggingface": ("HUGGINGFACE_API_KEY", "HF_TOKEN"),
    "replicate": ("REPLICATE_API_KEY", "REPLICATE_API_TOKEN"),
    "bedrock": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "sagemaker": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "vertex_ai": ("VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"),
    "nvidia_nim": ("NVIDIA_NIM_API_KEY",), "cloudflare": ("CLOUDFLARE_API_KEY",),
    "ai21": ("AI21_API_KEY",), "nlp_cloud": ("NLP_CLOUD_API_KEY",),
    "voyage": ("VOYAGE_API_KEY",), "sambanova": ("SAMBANOVA_API_KEY",),
    "moonshot": ("MOONSHOT_API_KEY",), "dashscope": ("DASHSCOPE_API_KEY",),
    "novita": ("NOVITA_API_KEY",), "hyperbolic": ("HYPERBOLIC_API_KEY",),
    "nebius": ("NEBIUS_API_KEY",), "featherless_ai": ("FEATHERLESS_AI_API_KEY",),
    "github": ("GITHUB_API_KEY",), "watsonx": ("WATSONX_APIKEY", "WATSONX_API_KEY",
                                               "WATSONX_TOKEN"),
}
_MODEL_FLAGS = ("--models", "-m", "--chair", "--council")


def _named(argv: list[str]) -> dict[str, list[str]]:
    """The values of the model-naming flags on ``argv`` (``-m a,b``, ``--models=a``, ``-ma``)."""
    found: dict[str, list[str]] = {}
    args = iter(argv)
    for arg in args:
        if arg == "--":
            break
        for flag in _MODEL_FLAGS:
            if arg == flag:
                found.setdefault(flag, []).append(next(args, ""))
            elif flag.startswith("--") and arg.startswith(flag + "="):
                found.setdefault(flag, []).append(arg[len(flag) + 1:])
            elif flag == "-m" and arg.startswith("-m") and not arg.startswith("--"):
                found.setdefault(flag, []).append(arg[2:])
    return found


def _specs(values: Iterable) -> list[str]:
    out = []
    for value in values:
        if isinstance(value, str):
            out += [s.strip() for s in value.split(",") if s.strip()]
        elif isinstance(value, list):
            out += _specs(value)
    return out


def _section(config: Mapping, name: str) -> dict:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def job_specs(argv: list[str], config: Mapping) -> list[str]:
    """The model names the job addresses: its flags' (a saved council expanded), else every
    name config.json holds (defaults, councils, aliases: a default may come from any)."""
    named = _named(argv)
    councils = _section(config, "councils")
    specs = _specs(named.get("--models", []) + named.get("-m", []) + named.get("--chair", []))
    for name in named.get("--council", []):
        specs += _specs([councils.get(name, [])])
    if (named.get("--models") or named.get("-m") or named.get("--council")) \
            and "--retry-failed" not in argv:
        return specs
    defaults = _section(config, "defaults")
    specs += _specs([defaults.get("models", []), defaults.get("chair", [])])
    specs += _specs(list(councils.values()))
    specs += _specs(list(_section(config, "aliases").values()))
    return specs


def providers_of(specs: list[str], config: Mapping) -> set[str]:
    """The provider of each name, aliases followed (a loop ends where it loops)."""
    aliases = _section(config, "aliases")
    found: set[str] = set()
    for spec in specs:
        seen: set[str] = set()
        base = spec.partition("@")[0]
        while base in aliases and base not in seen and isinstance(aliases[base], str):
            seen.add(base)
            base = aliases[base].partition("@")[0]
        provider, sep, _ = base.partition("/")
        if sep and provider:
            found.add(provider)
    return found


def key_names(argv: list[str], config: Mapping, environ: Mapping[str, str]) -> set[str]:
    """The variables the daemon may ask for while it runs ``argv``."""
    declared = _section(config, "providers")
    names: set[str] = set()
    for provider in providers_of(job_specs(argv, config), config):
        entry = declared.get(provider)
        if isinstance(entry, dict):
            var = entry.get("api_key_env")
            if isinstance(var, str) and var:
                names.add(var)
            continue
        names.update(LITELLM_KEYS.get(provider, ()))
        prefix = re.sub(r"[^A-Z0-9]+", "_", provider.upper()) + "_"
        names.update(n for n in environ if n.startswith(prefix))  # a provider not in the table
    return names


def read_config(home: Path) -> dict:
    try:
        data = json.loads((home / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
