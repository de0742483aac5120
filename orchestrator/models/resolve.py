"""Model names to resolved models through the plugins' ``resolve_model`` hook: the one path
every face and the doctor share (the core, so no core module needs the CLI for it)."""

from __future__ import annotations

from orchestrator.config import Config
from orchestrator.models import addressing as models
from orchestrator.plugin_host.hooks import HookRunner


def resolver(pm, warn=None):
    """The ``resolve_model`` hook as a plain function (None when no plugin claims a name).

    Isolated like every other hook: a plugin that raises is skipped with one warning per
    plugin and resolution goes on, so one broken resolver cannot stop every run. A deliberate
    ``OrchError`` (a name the plugin owns but cannot serve) is still the command's error."""
    runner = HookRunner(pm, config=_config())
    warned: set[str] = set()
    if warn is None:
        from orchestrator.notices import warn

    def on_error(plugin: str, hook: str, exc: BaseException) -> None:
        if plugin not in warned:
            warned.add(plugin)
            from orchestrator.plugin_host.boundary import said

            warn(f"plugin {plugin}: resolve_model failed and was skipped: {said(exc)}")

    return lambda spec, config: runner.first_sync("resolve_model", on_error, spec=spec,
                                                  config=config)


def _config():
    from orchestrator import runtime
    from orchestrator.errors import OrchError

    try:
        return runtime.config()
    except OrchError:
        return None


def resolve_all(specs: list[str], config: Config, pm, warn=None) -> list[models.ResolvedModel]:
    resolve = resolver(pm, warn)
    return [models.resolve(s, config, plugin_resolver=resolve) for s in specs]
