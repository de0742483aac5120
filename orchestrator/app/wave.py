"""Preparing a wave, a deliberation or a retry: every check before any spend, then the
``WaveSpec`` (with its wave id) and the plugin manager to run it with.

The one path every face takes (``orch fanout``, `orch mcp`'s fanout tool, the daemon's
client): budgets' plugins, ``plugin_config``, models, keys, briefing, names, workspace."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.app.budgets import require_budget_plugins
from orchestrator.app.requests import (
    DEFAULT_MAX_LEGS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT_MIN,
    MAX_TIMEOUT_MIN,
    Fanout,
    Retry,
)
from orchestrator.briefing import check_briefing
from orchestrator.errors import UsageProblem
from orchestrator.models.addressing import check_key
from orchestrator.models.resolve import resolve_all
from orchestrator.security.workspace_root import choose as choose_workspace

__all__ = ["DEFAULT_MAX_LEGS", "MAX_TIMEOUT_MIN", "prepare_fanout", "prepare_retry",
           "prepare_wave"]


@dataclass
class DeliberationPlan:
    """A fanout with ``rounds`` ≥ 2: its first round's spec, the rounds and peers."""

    spec: object  # WaveSpec
    rounds: int
    peers: int | None


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
                 chair: str | None, timeout_min: float | None, max_steps: int | None,
                 tools_mode: str | None,
                 workspace: str | None, workspace_any: bool, max_legs: int, tag: str | None,
                 no_plugins: bool, budgets: dict, retry_of: str | None = None,
                 prior: list | None = None, retry_options: dict | None = None,
                 kept_from: dict[str, str] | None = None, pm=None,
                 validate_models: bool = True, quiet: bool = False, tools_asked: bool = True,
                 notices: list[str] | None = None, aggregate: str | None = None,
                 synthesis: str | None = None, rounds: int = 1):
    """Every check before any spend, then the WaveSpec and the plugin manager to run it
    with. ``tools_asked`` False: the tools are the default, not the user's request (a base
    model is then offered none: the local plugin). ``notices``: where a notice to say once
    the run starts goes (default: stderr now, unless ``quiet``). ``aggregate``,
    ``synthesis``: what the run ends on besides its answers (:func:`check_outcome`).
    ``timeout_min``, ``max_steps`` None: the defaults."""
    from orchestrator import runtime
    from orchestrator.engine.spec import WaveSpec, new_wave_id

    check_outcome(chair=chair, rounds=rounds, aggregate=aggregate, synthesis=synthesis)
    timeout_min = DEFAULT_TIMEOUT_MIN if timeout_min is None else timeout_min
    max_steps = DEFAULT_MAX_STEPS if max_steps is None else max_steps
    if len(specs) > max_legs:
        raise UsageProblem(f"{len(specs)} legs is more than --max-legs {max_legs}; pass fewer "
                        f"models or raise --max-legs")
    pm = pm or runtime.plugin_manager(enabled=not no_plugins)
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
        if notices is None:
            from orchestrator.notices import say

            say(notice)
        else:
            notices.append(notice)
    spec = WaveSpec(models=resolved, briefing=briefing, runs_dir=runs.absolute(),
                    timeout_s=timeout_min * 60, max_steps=max_steps, chair=chair_model, tag=tag,
                    project_dir=os.getcwd(), workspace=root, retry_of=retry_of, prior=prior or [],
                    wave_id=new_wave_id(),
                    options={"plugins": not no_plugins, "tools": tools_mode or "read",
                             "tools_asked": tools_asked,
                             "workspace": str(root) if root else None, **budgets,
                             **({"aggregate": aggregate} if aggregate else {}),
                             **({"synthesis": synthesis} if synthesis else {}),
                             **(retry_options or {})},
                    synthesis=synthesis or "plain")
    return spec, pm


def runs_dir_of(request) -> Path:
    from orchestrator import config as config_mod

    return Path(request.runs_dir) if request.runs_dir else config_mod.runs_dir()


def prepare_fanout(request: Fanout):
    """A fanout (or, with rounds, a deliberation), prepared."""
    from orchestrator import runtime
    from orchestrator.app.model_choice import choose_models
    from orchestrator.app.prepared import Prepared
    from orchestrator.briefing import compose, read_context

    cfg = runtime.config()
    pm = runtime.plugin_manager(enabled=not request.no_plugins)
    specs = choose_models(request.models, request.council, cfg, pm)
    briefing = compose(request.prompt, read_context(request.context))
    notices: list[str] = []
    spec, pm = prepare_wave(
        specs, briefing, request.prompt_source, cfg=cfg, runs=runs_dir_of(request),
        chair=request.chair, timeout_min=request.timeout_min, max_steps=request.max_steps,
        tools_mode=request.tools, workspace=request.workspace,
        workspace_any=request.workspace_any, max_legs=request.max_legs, tag=request.tag,
        no_plugins=request.no_plugins, budgets=dict(request.budgets), pm=pm,
        validate_models=request.validate_models, quiet=request.quiet,
        tools_asked=request.tools is not None, notices=notices, aggregate=request.aggregate,
        synthesis=request.synthesis, rounds=request.rounds)
    if request.rounds > 1:
        plan, kind = DeliberationPlan(spec, request.rounds, request.peers), "deliberation"
    else:
        plan, kind = spec, "wave"
    return as_prepared(Prepared, request, kind, spec, plan, pm, cfg, notices)


def prepare_retry(request: Retry):
    """A retry of a wave's failed legs, prepared under its family's claim (released when
    the prepared run is closed)."""
    from orchestrator import runtime
    from orchestrator.app import retry
    from orchestrator.app.prepared import Allowance, Prepared

    cfg = runtime.config()
    pm = runtime.plugin_manager(enabled=not request.no_plugins)
    runs = runs_dir_of(request)
    prepared = Prepared(request=request, kind="wave", run_id="", models=[],
                        key_vars=frozenset(), account=Allowance(run_id=""), plan=None, pm=pm,
                        config=cfg)
    with prepared.resources as resources:
        inputs = retry.plan(request, runs=runs, cfg=cfg, pm=pm, resources=resources)
        if inputs.nothing is not None:
            prepared.nothing = inputs.nothing
            prepared.resources = resources.pop_all()
            return prepared
        notices: list[str] = []
        spec, pm = prepare_wave(
            inputs.specs, inputs.briefing, inputs.prompt_source, cfg=cfg, runs=runs,
            chair=inputs.chair, timeout_min=inputs.timeout_min, max_steps=inputs.max_steps,
            tools_mode=inputs.tools, workspace=inputs.workspace,
            workspace_any=request.workspace_any, max_legs=request.max_legs, tag=inputs.tag,
            no_plugins=request.no_plugins, budgets=inputs.budgets, retry_of=inputs.wave_id,
            prior=inputs.prior, retry_options=inputs.options, kept_from=inputs.kept_from,
            pm=pm, validate_models=request.validate_models, quiet=request.quiet,
            tools_asked=inputs.tools_asked, notices=notices, aggregate=inputs.aggregate,
            synthesis=inputs.synthesis)
        spec.chair_only_if_new = inputs.chair_only_if_new
        spec.histories = inputs.histories
        # e.g. requests in flight at a kill: said before it spends
        done = as_prepared(Prepared, request, "wave", spec, spec, pm, cfg,
                         [*inputs.notices, *notices])
        done.account.family = inputs.family
        done.account.of_family = inputs.account
        done.resources = resources.pop_all()  # the claim: held until the run ends
        return done


def as_prepared(cls, request, kind: str, spec, plan, pm, cfg, notices: list[str]):
    from orchestrator.app.declared import declared_variables, settings_among
    from orchestrator.app.prepared import Allowance
    from orchestrator.keys import capture
    from orchestrator.run_ceiling import given

    models = [*spec.models, *([spec.chair] if spec.chair else [])]
    names, unfit = declared_variables(models, pm)
    return cls(request=request, kind=kind, run_id=spec.wave_id, models=models, key_vars=names,
               account=Allowance(run_id=spec.wave_id, ceilings=given(spec.options, pm)),
               plan=plan, keys=capture(names, settings=settings_among(names)),
               notices=notices, unfit_for_daemon=unfit,
               pm=pm, config=cfg)
