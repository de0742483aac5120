"""What a retry of a wave runs (``orch fanout --retry-failed WAVE``): the failed slots of its
whole family, its briefing, the budgets it keeps, what its family has left of a run ceiling
and what its chair reads, planned under the family's claim (engine/retry.py plans it,
engine/family_claim.py claims it). Every face that retries shares it."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError


@dataclass
class RetryInputs:
    """A retry's wave, as ``prepare_wave`` takes it; ``nothing``: no slot failed (why)."""

    wave_id: str
    specs: list[str] = field(default_factory=list)
    briefing: str = ""
    prompt_source: str = ""
    tag: str | None = None
    chair: str | None = None
    chair_only_if_new: bool = False
    tools: str | None = None
    tools_asked: bool = True
    aggregate: str | None = None
    synthesis: str | None = None
    workspace: str | None = None
    budgets: dict[str, Any] = field(default_factory=dict)
    timeout_min: float | None = None  # the wave's own unless given now; None: the default
    max_steps: int | None = None
    kept_from: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # retry_slots, ceilings' families
    prior: list[Any] = field(default_factory=list)
    # a continued wave's: each retried slot's conversation before its briefing
    histories: list[list[dict[str, str]]] | None = None
    family: dict[str, dict[str, Any]] = field(default_factory=dict)  # per run ceiling
    account: dict[str, Any] = field(default_factory=dict)  # what the family's account opens from
    notices: list[str] = field(default_factory=list)  # said before it spends
    nothing: str | None = None


def plan(request, *, runs: Path, cfg, pm, resources: ExitStack) -> RetryInputs:
    """The retry of ``request.wave_id`` (an id or a unique prefix), claimed for as long as
    ``resources`` is open: one retry of a family at a time, each planning from what the one
    before it paid."""
    from orchestrator.budget_guards import declarations
    from orchestrator.engine import leg_limits
    from orchestrator.engine.family_claim import claim_family
    from orchestrator.engine.rebuild import resolve_wave_id
    from orchestrator.engine.retry import family_root, plan_retry

    wave_id = resolve_wave_id(runs, request.wave_id)  # a unique prefix names the id
    resources.enter_context(claim_family(runs, family_root(runs, wave_id)))
    # what the plugins declare, loaded or not: a budget kept from the wave whose plugin is
    # now off is refused, never dropped (budget_guards.py)
    budgets = dict(request.budgets)
    declared = [o for _, o in declarations(pm, cfg, no_plugins=request.no_plugins)]
    found = plan_retry(runs, wave_id, chair_model=request.chair,
                       ceilings=[o for o in declared if o.run_ceiling and o.key not in budgets])
    out = RetryInputs(wave_id=wave_id)
    if found.empty:  # a leg completed in any member of the family is never paid again
        also = f" in its family of {len(found.family)} waves" if len(found.family) > 1 else ""
        out.nothing = f"wave {wave_id} has no failed legs{also}: nothing to retry"
        return out
    try:
        out.briefing = (runs / wave_id / "briefing.md").read_text(encoding="utf-8")
    except OSError as exc:
        raise OrchError(f"cannot read the briefing of wave {wave_id} "
                        f"({exc.strerror or exc}); run the wave anew") from None
    old = found.wave.get("options") or {}
    out.specs, out.prompt_source = list(found.models), f"{wave_id}/briefing.md"
    out.tag = request.tag or found.wave.get("tag")
    out.chair = found.chair_model if found.chair else None
    out.chair_only_if_new = found.chair_only_if_new
    out.options["retry_slots"] = found.slots
    from orchestrator.engine import histories

    before = histories.read(runs / found.root) if found.root else {}
    if before:  # a follow-up's failed leg is asked again with its own conversation
        out.histories = [before.get(slot, []) for slot in found.slots]
    out.tools_asked = request.tools is not None or old.get("tools_asked", True)
    out.tools = request.tools or old.get("tools")
    out.aggregate = request.aggregate or old.get("aggregate")
    out.synthesis = request.synthesis or old.get("synthesis")
    out.workspace = request.workspace or old.get("workspace")
    names = {o.key for o in declared}
    kept = {k: v for k, v in old.items() if k in names and k not in budgets}
    out.kept_from = dict.fromkeys(kept, wave_id)
    out.budgets = {**kept, **budgets}  # a retry keeps its wave's budgets unless overridden
    out.timeout_min, out.max_steps = leg_limits.kept(  # and its legs' limits, as budgets
        found.wave, wave_id, timeout_min=request.timeout_min, max_steps=request.max_steps)
    for key, family in found.ceilings.items():  # the family's, less what it spent
        out.budgets[key] = family["left"]
        out.options[f"{key}_family"] = family
        out.kept_from[key] = family["root"]
    out.family = dict(found.ceilings)
    out.prior = list(found.prior)
    out.notices = list(found.notices)  # e.g. requests in flight at a kill
    out.account = found.account_args  # reopened where the retry runs (app/start.py)
    return out
