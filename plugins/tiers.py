"""Capability tiers: small models get a request made for them, not a prompt hoping they cope.

Each leg's model is ``minimal`` or ``default``, decided in this order:

1. config: ``plugin_config.tiers.models[MODEL]`` (``orch model set-tier MODEL minimal``);
2. the catalogue: a model litellm knows and serves with native function calling is
   ``default`` (litellm's metadata has no parameter count, so it can only vouch, not demote);
3. the name: a parameter count at or under ``minimal_max_params_b`` (9) billion —
   ``qwen3-4b``, ``Llama-3.1-8B``, ``gemma-3-270m`` — is ``minimal``; the largest count wins,
   so ``8x7b`` is 56B and ``30b-a3b`` is 30B;
4. otherwise ``default``.

``minimal`` gets a compact system prompt, tool schemas lowered to a grammar-safe subset, pinned
sampling and (through the rosters plugin) the minimal roster. ``default`` is left exactly as
the engine built it: a default-tier request is byte-identical to one sent without this plugin,
unless config gives that model its own prompt or sampling (``plugin_config.tiers.overrides``).

``leg_start`` is ``tryfirst``, unlike the other built-in hooks: every other plugin's
``leg_start`` (and every later hook) can read ``leg.tier``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from orchestrator.hookspecs import hookimpl

NAME = "tiers"
TIERS = ("minimal", "default")
MINIMAL_MAX_PARAMS_B = 9.0
MINIMAL_SAMPLING: dict[str, Any] = {"temperature": 0.2}

# Kept short on purpose (measured in docs/performance.md): small models follow a few plain
# rules better than a page of them, and every token here is paid on every request.
MINIMAL_PROMPT = (
    "You are a careful assistant. Do the task in the user's message and nothing else.\n"
    "- Be short and exact. If you are not sure, say so instead of guessing.\n"
    "- Give the final answer in the form the task asks for."
)
MINIMAL_TOOLS_PROMPT = (
    "\n- You may call the tools listed, one at a time. Arguments must be a JSON object with "
    "exactly the parameters the tool describes.\n"
    "- When you know enough, stop calling tools and write the answer."
)
MINIMAL_FILES_PROMPT = (
    "\n- File paths are relative to the workspace root. Find files first ({finders}), then "
    "read only the lines you need (offset, limit)."
)


def minimal_prompt(tools) -> str:
    """The compact prompt, mentioning only tools the leg really has."""
    prompt = MINIMAL_PROMPT
    if tools:
        prompt += MINIMAL_TOOLS_PROMPT
    finders = [n for n in ("list", "grep", "glob") if n in tools]
    if "read" in tools and finders:
        prompt += MINIMAL_FILES_PROMPT.format(finders=", ".join(finders))
    return prompt


# A parameter count in a model name: "4b", "8B", "1.5b", "270m", "8x7b"; not "a3b" (active
# parameters of a mixture) and not digits glued to letters ("qwen3").
_PARAMS = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)([bm])(?![a-z0-9])", re.I)


def params_b(name: str) -> float | None:
    """The largest parameter count (in billions) the model's name states, if any."""
    tail = name.split("@", 1)[0].rsplit("/", 1)[-1]
    counts = []
    for experts, number, unit in _PARAMS.findall(tail):
        value = float(number) * (int(experts) if experts else 1)
        counts.append(value / 1000 if unit.lower() == "m" else value)
    return max(counts) if counts else None


def model_entry(mapping: dict[str, Any], model, aliases: dict[str, str]) -> Any:
    """``mapping``'s entry for ``model``: by its name, its name without a variant, or any
    alias that leads to it (config is written by people, who use their aliases)."""
    for key in (model.name, model.base_name):
        if key in mapping:
            return mapping[key]
    for alias in mapping:
        seen, target = set(), alias
        while target in aliases and target not in seen:
            seen.add(target)
            target = aliases[target].split("@", 1)[0]
        if seen and target == model.base_name:
            return mapping[alias]
    return None


def decide(model, config) -> tuple[str, str]:
    """(tier, source) for ``model``; source is config | catalog | name | fallback."""
    settings = config.plugin_config(NAME)
    chosen = model_entry(settings.get("models") or {}, model, config.aliases)
    if chosen in TIERS:
        return chosen, "config"
    if not model.declared:
        from orchestrator.models.catalog import model_info

        try:
            if model_info(model).supports_tools:
                return "default", "catalog"
        except Exception:
            pass
    count = params_b(model.base_name)
    limit = float(settings.get("minimal_max_params_b") or MINIMAL_MAX_PARAMS_B)
    if count is not None:
        return ("minimal" if count <= limit else "default"), "name"
    return "default", "fallback"


def _override(leg) -> dict[str, Any]:
    overrides = leg.plugin_config(NAME).get("overrides") or {}
    entry = model_entry(overrides, leg.model, leg.config.aliases)
    return entry if isinstance(entry, dict) else {}


def _minimal_settings(leg) -> dict[str, Any]:
    value = leg.plugin_config(NAME).get("minimal")
    return value if isinstance(value, dict) else {}


@hookimpl(tryfirst=True)
def leg_start(leg):
    """Decide the tier first, so every later hook (and other plugins' leg_start) sees it."""
    tier, source = decide(leg.model, leg.config)
    leg.tier = tier
    leg.set("tier", tier)
    leg.set("tier_source", source)


@hookimpl(trylast=True)
def system_prompt(leg):
    """A per-model prompt from config, else the compact prompt for minimal, else pass."""
    override = _override(leg).get("prompt")
    if isinstance(override, str) and override:
        return override
    if leg.tier != "minimal":
        return None
    custom = _minimal_settings(leg).get("prompt")
    if isinstance(custom, str) and custom:
        return custom
    return minimal_prompt(leg.tools)


@hookimpl(trylast=True)
def tool_roster(leg, tools):
    """Minimal: every tool's schema lowered to what grammar-constrained decoders accept.
    Copies, never the plugin's own Tool: another leg of the wave may be default-tier."""
    if leg.tier != "minimal" or not tools:
        return None
    return [dataclasses.replace(t, parameters=lower_schema(t.parameters)) for t in tools]


def pinned_sampling(leg) -> dict[str, Any]:
    """Tier sampling, then the model's override; the variant the user chose (``@hot``) is
    already in the request's params and stays on top."""
    pinned: dict[str, Any] = {}
    if leg.tier == "minimal":
        configured = _minimal_settings(leg).get("sampling")
        pinned.update(MINIMAL_SAMPLING if configured is None else configured)
    pinned.update(_override(leg).get("sampling") or {})
    return pinned


@hookimpl(trylast=True)
def before_request(leg, request):
    pinned = pinned_sampling(leg)
    if not pinned:
        return None
    added = {k: v for k, v in pinned.items() if k not in request.params}
    if not added:
        return None
    if "sampling_pinned" not in leg.record.extra:
        leg.set("sampling_pinned", added)
    return request.evolve(params={**request.params, **added})


# -- tool schemas a grammar can hold --------------------------------------------------------
# Grammar-constrained decoders (llama.cpp, vLLM's guided decoding) reject or mis-handle much of
# JSON Schema. What survives lowering is this subset; everything else is dropped.
KEEP = frozenset({"type", "description", "properties", "required", "items", "enum", "default",
                  "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
                  "additionalProperties"})
_TYPE_RANK = {"boolean": 0, "integer": 1, "number": 2, "string": 3, "array": 4, "object": 5,
              "null": 9}
_MAX_DEPTH = 32


def lower_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without ``format``, ``pattern``, ``anyOf``/``oneOf``/``allOf`` or ``$ref``:
    references inlined (a cycle becomes a plain object), ``allOf`` merged, every union
    (``anyOf``, ``oneOf``, a list of types) flattened to its simplest member."""
    return _lower(schema, schema, (), 0)


def _lower(node: Any, root: dict[str, Any], refs: tuple[str, ...], depth: int) -> Any:
    if node is True or not isinstance(node, dict) or depth > _MAX_DEPTH:
        return {}
    node = dict(node)
    ref = node.pop("$ref", None)
    if isinstance(ref, str):
        target = _pointer(root, ref) if ref not in refs else {"type": "object"}
        node = {**_lower(target, root, (*refs, ref), depth + 1), **node}
    for key in ("allOf",):
        if isinstance(node.get(key), list):
            node = _merge([_lower(m, root, refs, depth + 1) for m in node.pop(key)], node)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            members = [_lower(m, root, refs, depth + 1) for m in node.pop(key)]
            node = {**min(members, key=_complexity), **node}
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in KEEP:
            continue
        if key == "type" and isinstance(value, list):
            value = min(value, key=lambda t: _TYPE_RANK.get(t, 8)) if value else "string"
        elif key == "properties" and isinstance(value, dict):
            value = {name: _lower(sub, root, refs, depth + 1) for name, sub in value.items()}
        elif key == "items":
            first = value[0] if isinstance(value, list) and value else value
            value = _lower(first, root, refs, depth + 1)
        elif key == "additionalProperties" and not isinstance(value, bool):
            value = _lower(value, root, refs, depth + 1)
        out[key] = value
    if isinstance(out.get("required"), list):
        props = out.get("properties") or {}
        out["required"] = [r for r in out["required"] if r in props]
    if "properties" in out and "type" not in out:
        out["type"] = "object"
    return out


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """A local JSON pointer (``#/$defs/Name``); anything else resolves to ``{}``."""
    if not ref.startswith("#"):
        return {}
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node


def _merge(members: list[dict[str, Any]], own: dict[str, Any]) -> dict[str, Any]:
    """``allOf``: every member holds, so properties and required lists add up; for any
    other keyword the schema's own value wins, then the first member's."""
    merged: dict[str, Any] = {}
    for member, wins in [*((m, False) for m in members), (own, True)]:
        for key, value in member.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                have = merged.get("required", [])
                merged["required"] = [*have, *(r for r in value if r not in have)]
            elif wins or key not in merged:
                merged[key] = value
    return merged


def _complexity(member: dict[str, Any]) -> tuple[int, int, int]:
    kind = member.get("type")
    kind = min(kind, key=lambda t: _TYPE_RANK.get(t, 8)) if isinstance(kind, list) and kind \
        else kind
    return (kind == "null", _TYPE_RANK.get(kind, 8) if isinstance(kind, str) else 8,
            len(json.dumps(member, sort_keys=True, default=str)))
