"""Every model a user can address, for ``orch models``: aliases, declared providers' models
(``GET /models``, cached 24 h in ``ORCH_HOME/cache``), local models, and litellm's catalogue
for the providers whose key variable is set. Each with what orch knows about it."""

from __future__ import annotations

import fnmatch
import json
import time
from typing import Any

from orchestrator import config as config_mod
from orchestrator.store import write_json_atomic

CACHE_TTL_S = 24 * 3600
# litellm providers listed when one of their key variables is set (names only, never values).
KEYED_PROVIDERS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",), "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",), "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",), "cohere_chat": ("COHERE_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY",), "perplexity": ("PERPLEXITYAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",), "deepinfra": ("DEEPINFRA_API_KEY",),
}


def cache_path():
    return config_mod.home() / "cache" / "models.json"


def provider_models(pid: str, entry: dict, *, refresh: bool = False,
                    warn=None) -> tuple[list[str], str]:
    """(model ids, where from: ``live`` | ``cache`` | ``stale cache`` | ``unreachable``).

    A refresh that lists fewer models than the cache held says so (``warn``, default stderr)
    and one that lists none keeps the cached list: a half-started server never empties it."""
    from orchestrator.models.catalog import record_windows, windows_of
    from orchestrator.operations.doctor import probe_model_entries
    from orchestrator.security.secrets import has_url_credentials

    if has_url_credentials(entry.get("base_url")):  # never probed, never cached (orch doctor)
        return [], "unreachable"

    path = cache_path()
    try:
        cache = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        cache = {}
    hit = cache.get(pid) if isinstance(cache, dict) else None
    fresh = (isinstance(hit, dict) and hit.get("base_url") == entry.get("base_url")
             and time.time() - float(hit.get("fetched_at", 0)) < CACHE_TTL_S)
    if fresh and not refresh:
        return list(hit.get("models") or []), "cache"
    from orchestrator import keys

    key = keys.read(entry.get("api_key_env"))
    entries, _why = probe_model_entries(entry["base_url"], key)
    models = None if entries is None else [str(m["id"]) for m in entries if m.get("id")]
    if entries:  # the windows the endpoint says (vLLM, llama.cpp) go to catalog.json
        record_windows(pid, windows_of(entry["base_url"], entries, key))
    if models is None:
        if isinstance(hit, dict) and hit.get("base_url") == entry.get("base_url"):
            return list(hit.get("models") or []), "stale cache"
        return [], "unreachable"
    old = list(hit.get("models") or []) if isinstance(hit, dict) and \
        hit.get("base_url") == entry.get("base_url") else []
    gone = sorted(set(old) - set(models))
    if gone:
        say = warn or _stderr
        if not models:
            say(f"{pid} now lists no models (it listed {len(old)}); keeping the cached "
                "list - `orch models --refresh` once the server is up")
            return old, "stale cache"
        shown = ", ".join(gone[:5]) + (f" (+{len(gone) - 5})" if len(gone) > 5 else "")
        say(f"{pid} now lists {len(models)} models, {len(gone)} fewer than before: "
            f"{shown}")
    cache = cache if isinstance(cache, dict) else {}
    cache[pid] = {"base_url": entry["base_url"], "fetched_at": time.time(), "models": models}
    try:
        write_json_atomic(path, cache)
    except OSError:
        pass  # a read-only home: the listing still works, uncached
    return models, "live"


def _stderr(line: str) -> None:
    from orchestrator.notices import say

    say(line, "warning")


def keyed_litellm_models() -> list[str]:
    """litellm's chat models for providers whose key variable is set."""
    from orchestrator import keys

    keyed = [p for p, names in KEYED_PROVIDERS.items() if any(keys.is_set(n) for n in names)]
    if not keyed:
        return []
    from orchestrator.runtime import litellm

    found = []
    for key, info in litellm().model_cost.items():
        provider = info.get("litellm_provider")
        if provider in keyed and info.get("mode") == "chat":
            found.append(key if key.startswith(f"{provider}/") else f"{provider}/{key}")
    return sorted(set(found))


def _matches(name: str, pattern: str | None) -> bool:
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatch(name.lower(), pattern.lower())
    return pattern.lower() in name.lower()


def listing(cfg: config_mod.Config, pm, pattern: str | None = None, *,
            refresh: bool = False) -> dict[str, Any]:
    """``{"models": [row...], "providers": {id: source}}``: one row per addressable name."""
    names: list[tuple[str, str, str | None]] = []  # (name, source, alias target)
    names += [(a, "alias", t) for a, t in sorted(cfg.aliases.items()) if isinstance(t, str)]
    sources = {}
    for pid, entry in sorted(cfg.providers.items()):
        if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
            models, sources[pid] = provider_models(pid, entry, refresh=refresh)
            names += [(f"{pid}/{m}", "provider", None) for m in models]
    try:
        from orchestrator.local.model import catalogue
        from orchestrator.local.settings import LocalSettings

        local = catalogue(LocalSettings.from_config(cfg).models)
        names += [(f"local/{alias}", "local", None) for alias in local]
    except Exception:  # a bad `local` section: `orch doctor` says what is wrong
        pass
    names += [(n, "litellm", None) for n in keyed_litellm_models()]
    variants = used_variants(cfg)
    rows = [describe(name, source, target, cfg, pm, variants) for name, source, target in names
            if _matches(name, pattern) or (target and _matches(target, pattern))]
    return {"models": rows, "providers": sources}


def used_variants(cfg: config_mod.Config) -> dict[str, list[str]]:
    """base model -> the variants aliases and councils use it with."""
    from orchestrator.models.addressing import split_variant

    specs = [t for t in cfg.aliases.values() if isinstance(t, str)]
    specs += [m for ms in cfg.councils.values() if isinstance(ms, list) for m in ms
              if isinstance(m, str)]
    found: dict[str, set[str]] = {}
    for spec in specs:
        base, variant = split_variant(spec)
        if variant:
            found.setdefault(cfg.aliases.get(base, base), set()).add(variant)
    return {k: sorted(v) for k, v in found.items()}


def describe(name: str, source: str, target: str | None, cfg, pm,
             variants: dict[str, list[str]]) -> dict[str, Any]:
    from orchestrator.models.catalog import model_info
    from orchestrator.models.resolve import resolve_all

    row: dict[str, Any] = {"name": name, "source": source}
    if target:
        row["target"] = target
    try:
        model = resolve_all([name], cfg, pm, warn=lambda line: None)[0]
    except Exception as exc:
        return row | {"error": str(exc)}
    declared = cfg.providers.get(model.provider) if model.declared else None
    info = model_info(model, declared)
    if model.input_cost_per_mtok is not None or model.output_cost_per_mtok is not None:
        prices = (model.input_cost_per_mtok, model.output_cost_per_mtok)
        cost_source = "free" if model.free else "declared"
    elif info.input_cost_per_token is not None:
        prices = (info.input_cost_per_token * 1e6, (info.output_cost_per_token or 0) * 1e6)
        cost_source = "litellm"
    else:
        prices, cost_source = (None, None), "unknown"
    window = info.context_window
    if window is None and model.provider == "local":
        from orchestrator.local.settings import LocalSettings

        window = LocalSettings.from_config(cfg).n_ctx  # what the managed server loads
    decide = pm.builtin_function("tiers", "decide") if pm else None
    try:
        tier = decide(model, cfg)[0] if decide else None
    except Exception:
        tier = None
    return row | {
        "resolves_to": model.name, "provider": model.provider, "tier": tier,
        "context_window": window, "max_output_tokens": info.max_output_tokens,
        "input_cost_per_mtok": prices[0], "output_cost_per_mtok": prices[1],
        "cost_source": cost_source, "tools": info.supports_tools,
        "reasoning": info.supports_reasoning,
        "variants": variants.get(model.base_name, []),
    }
