"""What a model can do and how big it is: litellm's model metadata, overridden by what orch
learned from the endpoint itself (``ORCH_HOME/catalog.json``: a provider that answered 400
"does not support tools"), overridden by what a declared provider says. Never guessed:
unknown stays None."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.models.addressing import ResolvedModel


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
    collide with catalogue names), what the endpoint told us, the provider's declared values
    on top."""
    base = ModelInfo() if model.declared else _litellm_info(model.litellm_model)
    declared = declared or {}
    learned = detected(model)
    return ModelInfo(
        context_window=(declared.get("context_window") or model.context_window
                        or _window(learned) or base.context_window),
        max_output_tokens=(declared.get("max_output_tokens") or model.max_output_tokens
                           or base.max_output_tokens),
        supports_tools=declared.get("supports_tools", learned.get(
            "supports_tools",
            base.supports_tools if model.supports_tools is None else model.supports_tools)),
        supports_reasoning=declared.get("supports_reasoning", base.supports_reasoning),
        input_cost_per_token=base.input_cost_per_token,
        output_cost_per_token=base.output_cost_per_token,
    )


def prices(model: ResolvedModel) -> tuple[float, float] | None:
    """(input, output) dollars per token: declared prices, else litellm's; None = unknown."""
    if model.input_cost_per_mtok is not None and model.output_cost_per_mtok is not None:
        return model.input_cost_per_mtok / 1e6, model.output_cost_per_mtok / 1e6
    if model.declared:
        return None
    info = model_info(model)
    if info.input_cost_per_token is None or info.output_cost_per_token is None:
        return None
    return info.input_cost_per_token, info.output_cost_per_token


# -- what endpoints told us ------------------------------------------------------------------
# A 400 that says the model cannot take ``tools``: vLLM, Ollama, llama.cpp and hosted
# gateways word it differently.
_NO_TOOLS = re.compile(r"does not support (?:tools|tool[ _-]?(?:use|calling|calls?)|function"
                       r"[ _-]?calling)|tools? (?:are|is) not supported|tool[ _-]?(?:use|"
                       r"calling|choice) is not (?:supported|enabled)", re.I)


def _learned_path() -> Path:
    from orchestrator.config import home

    return home() / "catalog.json"


def _learned() -> dict[str, Any]:
    from orchestrator.store import read_json

    try:
        data = read_json(_learned_path())
    except (OSError, ValueError):  # missing, unreadable or not JSON: nothing learned
        return {}
    models = data.get("models") if isinstance(data, dict) else None
    return dict(models) if isinstance(models, dict) else {}


def detected(model: ResolvedModel) -> dict[str, Any]:
    """What orch learned about ``model`` from its endpoint (by base name, variants share)."""
    entry = _learned().get(model.base_name)
    return entry if isinstance(entry, dict) else {}


def _window(learned: dict[str, Any]) -> int | None:
    value = learned.get("context_window")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def windows_of(base_url: str, entries: list[dict[str, Any]], key: str | None) -> dict[str, int]:
    """model id -> context window, as the endpoint says it: vLLM's ``max_model_len`` on each
    ``/models`` entry; llama.cpp's ``n_ctx`` from ``/props`` (one model per server)."""
    found = {str(e["id"]): int(e["max_model_len"]) for e in entries
             if isinstance(e, dict) and e.get("id") and isinstance(e.get("max_model_len"), int)
             and e["max_model_len"] > 0}
    if found or len(entries) != 1 or not isinstance(entries[0], dict):
        return found
    n_ctx = _props_n_ctx(base_url, key)
    return {str(entries[0].get("id")): n_ctx} if n_ctx else {}


def _props_n_ctx(base_url: str, key: str | None) -> int | None:
    """llama.cpp's server: ``GET /props`` (beside ``/v1``) has the slot's ``n_ctx``."""
    import json
    import urllib.request

    root = base_url.rstrip("/").removesuffix("/v1")
    request = urllib.request.Request(root + "/props")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=3) as answer:
            body = json.loads(answer.read(1 << 20) or b"{}")
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    n_ctx = (settings.get("n_ctx") if isinstance(settings, dict) else None) or body.get("n_ctx")
    return n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 \
        else None


def record_windows(provider: str, windows: dict[str, int]) -> None:
    """Remember the windows a provider said (``catalog.json``), so the context guard and the
    read guard can check its models' requests."""
    from orchestrator.engine.record import now_iso
    from orchestrator.store import write_json_atomic

    models = _learned()
    changed = False
    for model_id, window in windows.items():
        name = f"{provider}/{model_id}"
        prev = models.get(name)
        entry = dict(prev) if isinstance(prev, dict) else {}
        if entry.get("context_window") == window:
            continue
        entry.update(context_window=window, window_learned_at=now_iso())
        models[name] = entry
        changed = True
    if not changed:
        return
    path = _learned_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"models": models})
    except OSError as exc:  # a read-only home: the next probe learns it again
        from orchestrator.runtime import log

        log().warning("catalog_not_written", path=str(path), error=str(exc))


def tools_unsupported(exc: BaseException) -> bool:
    """A provider error that says the model takes no ``tools``."""
    return (getattr(exc, "reason", None) == "bad_request"
            and bool(_NO_TOOLS.search(str(getattr(exc, "message", "")))))


def record_no_tools(model: ResolvedModel, message: str) -> None:
    """Remember that ``model`` has no native tool calling: later legs use the text protocol
    from their first request."""
    from orchestrator.engine.record import now_iso
    from orchestrator.store import write_json_atomic

    models = _learned()
    prev = models.get(model.base_name)
    models[model.base_name] = {**(prev if isinstance(prev, dict) else {}), "supports_tools": False,
                               "learned_at": now_iso(), "reason": message[:300]}
    path = _learned_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"models": models})
    except OSError as exc:  # a read-only home: this leg still retries, later ones re-learn
        from orchestrator.runtime import log

        log().warning("catalog_not_written", path=str(path), error=str(exc))
