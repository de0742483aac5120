"""A budget a run asks for needs its guard plugin on: the one refusal `orch fanout`, `orch
council run` and `orch mcp`'s tools share (orchestrator/budget_guards.py says it)."""

from __future__ import annotations


def require_budget_plugins(budgets: dict, pm, no_plugins: bool, cfg=None,
                           kept_from: dict[str, str] | None = None,
                           command: str = "fanout") -> None:
    """Refuse (exit 2, one line) a budget asked for by a flag or by config (or kept by a
    retry) whose plugin is off: it would be silently ignored (orchestrator/budget_guards.py);
    and (exit 1) a run that relies on a plugin that could not be loaded
    (plugin_host/fail_closed.py)."""
    from orchestrator import runtime
    from orchestrator.budget_guards import require_guards, require_option_plugins
    from orchestrator.plugin_host.fail_closed import require_loaded

    cfg = cfg if cfg is not None else runtime.config()
    require_loaded(pm, cfg)
    require_guards(budgets, pm, cfg, no_plugins=no_plugins, kept_from=kept_from,
                   command=command)
    require_option_plugins(pm, cfg)
