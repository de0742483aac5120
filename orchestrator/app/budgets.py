"""A budget a run asks for needs its guard plugin on: the one refusal `orch fanout`, `orch
council run` and `orch mcp`'s tools share (orchestrator/budget_guards.py says it)."""

from __future__ import annotations


def require_budget_plugins(budgets: dict, pm, no_plugins: bool, cfg=None,
                           kept_from: dict[str, str] | None = None,
                           command: str = "fanout") -> None:
    """Refuse (exit 2, one line) a budget asked for by a flag or by config (or kept by a
    retry) whose plugin is off: it would be silently ignored (orchestrator/budget_guards.py)."""
    from orchestrator import runtime
    from orchestrator.budget_guards import require_guards, require_option_plugins

    cfg = cfg if cfg is not None else runtime.config()
    require_guards(budgets, pm, cfg, no_plugins=no_plugins, kept_from=kept_from,
                   command=command)
    require_option_plugins(pm, cfg)
