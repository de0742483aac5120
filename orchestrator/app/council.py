"""Preparing a council run: every check before any spend (seats, chair, keys, diff, the
budgets' plugins), then the CouncilRun. `orch council run` (and the daemon running it) and
`orch mcp`'s council_run tool share it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.app.budgets import require_budget_plugins
from orchestrator.errors import UsageProblem


def prepare_council(text: str, prompt_source: str, *, cfg, models: str | list[str] | None,
                    council_name: str | None, chair: str | None, diff: str | None,
                    context, timeout_min: float, max_steps: int, tools_mode: str,
                    workspace: str | None, workspace_any: bool, tag: str | None,
                    no_plugins: bool, runs_dir: Path | None, budgets: dict, observe=None,
                    validate_models: bool = True, quiet: bool = False):
    """Every check before any spend (seats, chair, keys, diff, budgets' plugins), then the
    CouncilRun: the one path `orch council run` and `orch mcp`'s council_run tool share."""
    import os

    from orchestrator import config as config_mod
    from orchestrator import runtime
    from orchestrator.app.model_choice import choose_models
    from orchestrator.app.warm import import_litellm_meanwhile
    from orchestrator.council.preflight import preflight
    from orchestrator.council.run import CouncilRun
    from orchestrator.models.resolve import resolve_all

    specs = choose_models(models, council_name, cfg)
    chair = chair or cfg.defaults.get("chair")
    if not chair:
        raise UsageProblem("no chair: pass --chair MODEL (a model that is not a seat) or set "
                        "`defaults.chair` in config.json")
    from orchestrator.security.workspace_root import choose as choose_workspace

    root, notice = choose_workspace(workspace, allow_any=workspace_any)
    pm = runtime.plugin_manager(enabled=not no_plugins)
    require_budget_plugins(budgets, pm, no_plugins, cfg, command="council_run")
    from orchestrator.plugin_host.config_check import check_plugin_config

    check_plugin_config(cfg, pm)  # plugin_config.output_budget.tokens: -5 stops here
    seats = resolve_all(specs, cfg, pm)
    chair_model = resolve_all([chair], cfg, pm)[0]
    import_litellm_meanwhile()
    workspace_rules = cfg.plugin_config("workspace")  # the diff's files follow the tools' rules
    plan = preflight(seats=seats, chair=chair_model, prompt=text, diff=diff, paths=context,
                     cwd=Path.cwd(), prompt_source=prompt_source,
                     rules={"deny": workspace_rules.get("deny", ()),
                            "allow": workspace_rules.get("allow", ())})
    if validate_models:  # a typo fails here, before any spend, with the closest names
        from orchestrator.models.check import check_models_exist

        check_models_exist([*seats, chair_model], cfg)
    if notice and tools_mode == "read" and not quiet:  # said once the run is sure to start
        from orchestrator.notices import say

        say(notice)
    run = CouncilRun(plan, pm=pm, config=cfg, runs_dir=runs_dir or config_mod.runs_dir(),
                     timeout_s=timeout_min * 60, max_steps=max_steps, tag=tag,
                     project_dir=os.getcwd(), workspace=root, observe=observe,
                     resolve=lambda name: resolve_all([name], cfg, pm)[0],
                     options={"plugins": not no_plugins, "tools": tools_mode,
                              "workspace": str(root) if root else None, **budgets})
    run.spend.preflight()  # a stale ledger schema: one line, before any seat is paid for
    return run
