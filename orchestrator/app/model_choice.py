"""Which models a run seats when the face names none, a saved council, or a list: the
choice `orch fanout`, `orch council run` and `orch mcp`'s tools share (a plugin's default
through the hook boundary)."""

from __future__ import annotations

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.models.addressing import parse_model_list


def model_list(text: str, option: str = "--models") -> list[str]:
    """The comma-separated models, or a usage error when the list names none (``,,,``)."""
    names = parse_model_list(text)
    if not names:
        raise UsageProblem(f"{option} {text!r} names no model; pass e.g. "
                           f"{option} openai/gpt-4o-mini,myvllm/qwen3-8b")
    return names


def choose_models(models: str | None, council: str | None, cfg, pm=None) -> list[str]:
    if models and council:
        raise UsageProblem("pass either --models or --council, not both")
    if council:
        if council not in cfg.councils:
            known = ", ".join(sorted(cfg.councils)) or "none saved yet"
            raise UsageProblem(f"no saved council {council!r} (known: {known}); save one with "
                            "`orch council save NAME --models a,b,c`")
        return list(cfg.councils[council])
    if models is not None:
        return model_list(models)
    default = cfg.defaults.get("models")
    if default:
        return list(default)
    from orchestrator import runtime

    pm = pm or runtime.plugin_manager()
    chosen = default_models(pm, cfg)
    if chosen:  # a plugin's default (the local plugin: the embedded model on a bare machine)
        from orchestrator.notices import say
        from orchestrator.plugin_host.boundary import capped

        say(capped(str(chosen["notice"]).removeprefix("orch: ")))
        return list(chosen["models"])
    if pm.implementers("default_models"):  # a default exists, just not here (keys set)
        raise UsageProblem("no models given; pass --models a,b,c (or --council NAME, or set "
                        "`defaults.models` in config.json)")
    raise NoModels("no models: pass --models, add a provider, or enable the local plugin")


def default_models(pm, cfg) -> dict | None:
    """The first plugin's default models, through the hook boundary: a plugin that raises,
    answers the wrong shape or takes too long is skipped with one warning naming it."""
    from orchestrator.notices import warn as stderr_warn
    from orchestrator.plugin_host.boundary import said
    from orchestrator.plugin_host.hooks import HookRunner

    def skipped(plugin: str, hook: str, exc: BaseException) -> None:
        stderr_warn(f"plugin {plugin}: {hook} failed and was skipped: {said(exc)}")

    return HookRunner(pm, config=cfg).first_sync("default_models", skipped, config=cfg)


class NoModels(OrchError):
    """Nothing to run: a usage problem (exit 2), said in one line."""

    exit_code = 2
