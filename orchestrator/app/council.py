"""Preparing a council run: every check before any spend (seats, chair, keys, diff, the
budgets' plugins), then its plan. `orch council run`, the daemon's client and `orch mcp`'s
council_run tool share it; the run itself is made where it runs (app/start.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.app.budgets import require_budget_plugins
from orchestrator.app.requests import Council
from orchestrator.errors import UsageProblem


@dataclass
class CouncilPlan:
    """What a CouncilRun is made of: the pre-flight's plan (seats, chair, briefing) and the
    settings of every stage."""

    plan: Any  # council.preflight.Plan
    runs_dir: Path
    timeout_s: float
    max_steps: int
    tag: str | None
    project_dir: str
    workspace: Path | None
    options: dict[str, Any] = field(default_factory=dict)


def prepare_council(request: Council):
    """Every check before any spend (seats, chair, keys, diff, budgets' plugins), then the
    prepared council."""
    from orchestrator import config as config_mod
    from orchestrator import runtime
    from orchestrator.app.declared import declared_variables, settings_among
    from orchestrator.app.model_choice import choose_models
    from orchestrator.app.prepared import Allowance, Prepared
    from orchestrator.council.preflight import preflight
    from orchestrator.engine.spec import new_wave_id
    from orchestrator.keys import capture
    from orchestrator.models.resolve import resolve_all
    from orchestrator.plugin_host.config_check import check_plugin_config
    from orchestrator.run_ceiling import given
    from orchestrator.security.workspace_root import choose as choose_workspace

    cfg = runtime.config()
    specs = choose_models(request.models, request.council, cfg)
    chair = request.chair or cfg.defaults.get("chair")
    if not chair:
        raise UsageProblem("no chair: pass --chair MODEL (a model that is not a seat) or set "
                        "`defaults.chair` in config.json")
    root, notice = choose_workspace(request.workspace, allow_any=request.workspace_any)
    pm = runtime.plugin_manager(enabled=not request.no_plugins)
    budgets = dict(request.budgets)
    require_budget_plugins(budgets, pm, request.no_plugins, cfg, command="council_run")
    check_plugin_config(cfg, pm)  # plugin_config.output_budget.tokens: -5 stops here
    seats = resolve_all(specs, cfg, pm)
    chair_model = resolve_all([chair], cfg, pm)[0]
    workspace_rules = cfg.plugin_config("workspace")  # the diff's files follow the tools' rules
    plan = preflight(seats=seats, chair=chair_model, prompt=request.prompt, diff=request.diff,
                     paths=request.context, cwd=Path.cwd(), prompt_source=request.prompt_source,
                     rules={"deny": workspace_rules.get("deny", ()),
                            "allow": workspace_rules.get("allow", ())})
    if request.validate_models:  # a typo fails here, before any spend, with the closest names
        from orchestrator.models.check import check_models_exist

        check_models_exist([*seats, chair_model], cfg)
    notices = [notice] if notice and request.tools == "read" and not request.quiet else []
    runs = Path(request.runs_dir) if request.runs_dir else config_mod.runs_dir()
    options = {"plugins": not request.no_plugins, "tools": request.tools,
               "workspace": str(root) if root else None, **budgets}
    timeout_min, max_steps = request.limits()
    council = CouncilPlan(plan=plan, runs_dir=runs.absolute(), timeout_s=timeout_min * 60,
                          max_steps=max_steps, tag=request.tag, project_dir=os.getcwd(),
                          workspace=root, options=options)
    run_id = new_wave_id()
    models = [*seats, chair_model]
    names, unfit = declared_variables(models, pm)
    return Prepared(request=request, kind="council", run_id=run_id, models=models,
                    key_vars=names, account=Allowance(run_id=run_id, ceilings=given(
                        options, pm, "council_run")),
                    plan=council, keys=capture(names, settings=settings_among(names)),
                    notices=notices, unfit_for_daemon=unfit,
                    pm=pm, config=cfg)
