"""Tool rosters: which of the offered tools a leg may use, by tier and by model.

Each tier has a default roster of built-in tools (``default``: all of them; ``minimal``: the
few a small model handles well). Config adds per-model ``include``/``exclude`` lists, and
``exclude`` always wins. Tools contributed by third-party plugins are exempt from the tier cut
(their author offered them on purpose) but not from ``exclude``. ``--tools none`` empties the
roster. The engine records the final roster on the leg (``roster`` in metadata.json); this
plugin adds what it cut and why (``roster_cut``).

Config (``plugin_config.rosters``)::

    {"tiers": {"minimal": ["read", "grep", "list"], "default": "*"},
     "exclude": ["glob"],
     "models": {"myvllm/qwen3-8b": {"include": ["glob"], "exclude": ["grep"]}}}
"""

from __future__ import annotations

from typing import Any

from orch_plugins.tiers import model_entry

from orchestrator.hookspecs import hookimpl

NAME = "rosters"
ALL = "*"
DEFAULT_ROSTERS: dict[str, list[str] | str] = {
    "default": ALL,
    # Small models pick the wrong tool among many; glob patterns confuse them most, and
    # list + grep find the same files.
    "minimal": ["read", "grep", "list"],
}


def _names(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    return {str(v) for v in value or [] if v}


def plan(leg) -> tuple[set[str] | str, set[str], set[str]]:
    """(tier roster, includes, excludes) for ``leg`` from defaults and config."""
    settings = leg.plugin_config(NAME)
    rosters = {**DEFAULT_ROSTERS, **(settings.get("tiers") or {})}
    tier_roster = rosters.get(leg.tier, ALL)
    tier_roster = ALL if tier_roster == ALL else _names(tier_roster)
    entry = model_entry(settings.get("models") or {}, leg.model, leg.config.aliases)
    entry = entry if isinstance(entry, dict) else {}
    include = _names(entry.get("include"))
    exclude = _names(settings.get("exclude")) | _names(entry.get("exclude"))
    return tier_roster, include, exclude


@hookimpl(trylast=True)
def tool_roster(leg, tools):
    if leg.options.get("tools") == "none":
        if tools:
            leg.set("roster_cut", {"tools_none": sorted(t.name for t in tools)})
        leg.set("roster", [])
        return []
    if not tools:
        return None
    tier_roster, include, exclude = plan(leg)
    kept, excluded, tier_cut = [], [], []
    for tool in tools:
        if tool.name in exclude:
            excluded.append(tool.name)
        elif (not tool.builtin or tier_roster == ALL or tool.name in tier_roster
              or tool.name in include):
            kept.append(tool)
        else:
            tier_cut.append(tool.name)
    if not excluded and not tier_cut:
        return None
    cut: dict[str, Any] = {}
    if excluded:
        cut["excluded"] = sorted(excluded)
    if tier_cut:
        cut["tier"] = leg.tier
        cut["tier_cut"] = sorted(tier_cut)
    leg.set("roster_cut", cut)
    if not kept:
        leg.set("roster", [])  # the engine records only a non-empty roster
    return kept
