"""Preparing a wave: every check before any spend, then the WaveSpec and the plugin manager
to run it with. `orch fanout` (and the daemon running it) and `orch mcp`'s fanout tool share
it."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.app.budgets import require_budget_plugins
from orchestrator.briefing import check_briefing
from orchestrator.errors import UsageProblem
from orchestrator.models.addressing import check_key
from orchestrator.models.resolve import resolve_all
from orchestrator.security.workspace_root import choose as choose_workspace

DEFAULT_MAX_LEGS = 10
MAX_TIMEOUT_MIN = 7 * 24 * 60  # a week: past that a leg's time limit means nothing


def check_plugin_config(cfg, pm) -> None:
    from orchestrator.plugin_host.config_check import check_plugin_config as check

    check(cfg, pm)


def check_outcome(*, chair: str | None, rounds: int, aggregate: str | None,
                  synthesis: str | None) -> None:
    """What a run ends on, checked before any spend: ``--aggregate vote`` (a majority over
    the final answers, votes/aggregate.py) and the chair's ``--synthesis`` mode
    (chair/modes.py)."""
    from orchestrator.chair.modes import SYNTHESES
    from orchestrator.votes.aggregate import METHODS

    if aggregate is not None and aggregate not in METHODS:
        raise UsageProblem(f"--aggregate is one of {', '.join(METHODS)}, not {aggregate!r}")
    if synthesis is not None and synthesis not in SYNTHESES:
        raise UsageProblem(f"--synthesis is one of {', '.join(SYNTHESES)}, not {synthesis!r}")
    if synthesis == "structured" and not chair:
        raise UsageProblem("--synthesis structured is written by the chair; add --chair MODEL")
    if synthesis == "structured" and rounds > 1:
        raise UsageProblem("--synthesis structured is for a one-round fanout's chair; a "
                           "deliberation's chair writes a plain synthesis: drop --rounds or "
                           "--synthesis")


def prepare_wave(specs: list[str], briefing: str, prompt_source: str, *, cfg, runs: Path,
                 chair: str | None, timeout_min: float, max_steps: int, tools_mode: str | None,
                 workspace: str | None, workspace_any: bool, max_legs: int, tag: str | None,
                 no_plugins: bool, budgets: dict, retry_of: str | None = None,
                 prior: list | None = None, retry_options: dict | None = None,
                 kept_from: dict[str, str] | None = None,
                 validate_models: bool = True, quiet: bool = False, tools_asked: bool = True,
                 aggregate: str | None = None, synthesis: str | None = None, rounds: int = 1):
    """Every check before any spend, then the WaveSpec and the plugin manager to run it with:
    the one path `orch fanout` and `orch mcp`'s fanout tool share (budgets, plugins, keys).
    ``tools_asked`` False: the tools are the default, not the user's request (a base model
    is then offered none: the local plugin). ``aggregate``, ``synthesis``: what the run ends
    on besides its answers (:func:`check_outcome`)."""
    from orchestrator import runtime
    from orchestrator.engine.wave import WaveSpec

    check_outcome(chair=chair, rounds=rounds, aggregate=aggregate, synthesis=synthesis)
    if len(specs) > max_legs:
        raise UsageProblem(f"{len(specs)} legs is more than --max-legs {max_legs}; pass fewer "
                        f"models or raise --max-legs")
    pm = runtime.plugin_manager(enabled=not no_plugins)
    require_budget_plugins(budgets, pm, no_plugins, cfg, kept_from)
    check_plugin_config(cfg, pm)  # plugin_config.output_budget.tokens: -5 stops here
    resolved = resolve_all(specs, cfg, pm)
    chair_model = resolve_all([chair], cfg, pm)[0] if chair else None
    for model in {m.name: m for m in [*resolved, *([chair_model] if chair_model else [])]}.values():
        check_key(model)  # before any spend: an unknown provider or a missing key is one line
    check_briefing(briefing, prompt_source)  # the keys just read are registered: none goes out
    if validate_models:  # a typo fails here, before any spend, with the closest names
        from orchestrator.models.check import check_models_exist

        check_models_exist([*resolved, *([chair_model] if chair_model else [])], cfg)
    root, notice = choose_workspace(workspace, allow_any=workspace_any)
    if notice and (tools_mode or "read") == "read" and not quiet:
        from orchestrator.notices import say

        say(notice)
    spec = WaveSpec(models=resolved, briefing=briefing, runs_dir=runs,
                    timeout_s=timeout_min * 60, max_steps=max_steps, chair=chair_model, tag=tag,
                    project_dir=os.getcwd(), workspace=root, retry_of=retry_of, prior=prior or [],
                    options={"plugins": not no_plugins, "tools": tools_mode or "read",
                             "tools_asked": tools_asked,
                             "workspace": str(root) if root else None, **budgets,
                             **({"aggregate": aggregate} if aggregate else {}),
                             **({"synthesis": synthesis} if synthesis else {}),
                             **(retry_options or {})},
                    synthesis=synthesis or "plain")
    return spec, pm
