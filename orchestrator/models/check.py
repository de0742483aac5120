"""A model-name typo fails fast, before any spend: the name is checked against what the
provider says it serves (its ``GET /models``, cached 24 h by :mod:`orchestrator.models.listing`)
or, for litellm's own providers, litellm's catalogue. A name neither knows is a usage error
(exit 2) with the closest names; a list that cannot be fetched never blocks (offline is not a
typo), and ``--no-validate-models`` skips the check."""

from __future__ import annotations

import difflib

from orchestrator.errors import OrchError

# litellm providers whose catalogue is complete enough to call a name missing from it a typo.
CATALOGUED = ("openai", "anthropic", "gemini", "mistral", "groq", "deepseek", "xai")


class UnknownModel(OrchError):
    """A model name no list knows: a usage problem (exit 2), said in one line."""

    exit_code = 2


def suggest(name: str, known: list[str]) -> str:
    """'; did you mean a, b?' with the closest names, or ''. Compared without the shared
    ``provider/`` prefix, which would make every name look close."""
    prefix = name.partition("/")[0] + "/"
    short = {k.removeprefix(prefix): k for k in known}
    close = difflib.get_close_matches(name.removeprefix(prefix), list(short), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(short[c] for c in close)}?" if close else ""


def _litellm_names(provider: str) -> list[str]:
    from orchestrator.runtime import litellm

    found = []
    for key, info in litellm().model_cost.items():
        if info.get("litellm_provider") == provider and info.get("mode") in ("chat", None):
            found.append(key if key.startswith(f"{provider}/") else f"{provider}/{key}")
    return sorted(set(found))


def problem(model, cfg, *, warn=None) -> str | None:
    """Why ``model`` does not exist, or None when it does or nothing can tell."""
    from orchestrator.models.listing import provider_models

    base = model.base_name
    if model.declared:
        entry = cfg.providers.get(model.provider)
        if not isinstance(entry, dict) or not isinstance(entry.get("base_url"), str):
            return None
        models, source = provider_models(model.provider, entry, warn=warn)
        remote = base.partition("/")[2]
        if source == "cache" and remote not in models:  # loaded since: ask once more
            models, source = provider_models(model.provider, entry, refresh=True, warn=warn)
        if not models or remote in models:
            return None  # unreachable with no cache, or an empty list: never blocks
        # a gateway (LiteLLM proxy, OpenRouter) lists what the key it was asked with may use
        var = entry.get("api_key_env")
        whose = f" for the key in ${var}" if source == "live" and isinstance(var, str) and var \
            else ""
        return (f"{base} is not among the {len(models)} models {model.provider} lists{whose} "
                f"({source}){suggest(base, [f'{model.provider}/{m}' for m in models])}")
    if model.provider not in CATALOGUED or model.sampling.get("api_base"):
        return None
    known = _litellm_names(model.provider)
    if not known or base in known or model.litellm_model in known:
        return None
    return (f"{base} is not in litellm's catalogue of {len(known)} {model.provider} models"
            f"{suggest(base, known)}")


def check_models_exist(models, cfg, *, warn=None) -> None:
    """Raise :class:`UnknownModel` naming every model no list knows, before any request."""
    seen, problems = set(), []
    for model in models:
        if model.base_name in seen:
            continue
        seen.add(model.base_name)
        why = problem(model, cfg, warn=warn)
        if why:
            problems.append(why)
    if problems:
        raise UnknownModel("unknown model: " + "; ".join(problems) + " (check `orch models`, "
                           "or pass --no-validate-models to send the name as is)")
