"""Mend the tool-call arguments small models break; reject what cannot be mended with a tool
error that names what is wrong, so the model can fix its call and the leg goes on.

Syntax — smart or single quotes, trailing commas, comments, unbalanced brackets — is the
``json-repair`` library's job. What needs the tool's schema is done here: key names that differ
from the schema only by case style (``filePath`` / ``file-path`` → ``file_path``), values
coerced only where exactly one reading fits (``"5"`` → 5 for an integer, never ``"yes"`` →
true), and validation with ``jsonschema``. Arguments that are valid JSON and fit the schema
come back byte for byte unchanged, so the fast path is one ``json.loads`` and one validation.

Heavy imports (json_repair, jsonschema) wait for the first call that needs them: this module
is imported on every ``orch`` start-up.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.hookspecs import hookimpl

# Quotes that only make sense as JSON delimiters where they open or close a key or value.
_SMART_OPEN = re.compile(r"([{\[,:]\s*)([“„‟]|[‘‚‛])")
_SMART_CLOSE = re.compile(r"([”“]|[’‘])(\s*(?:[:,}\]]|$))")
_DOUBLE_SMART = "“”„‟"
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_MAX_ERROR = 300


@dataclass(frozen=True)
class Mended:
    """What :func:`mend` made of a call's arguments."""

    text: str  # the arguments to send on: the input itself when nothing needed mending
    fixes: tuple[str, ...] = ()  # kinds of repair made: syntax, key_case, coerced, ...
    error: str | None = None  # what is still wrong: the call must not run


def mend(raw: str, schema: dict[str, Any] | None = None) -> Mended:
    """Repair ``raw`` (a tool call's arguments) against ``schema``. Never raises."""
    try:
        return _mend(raw if isinstance(raw, str) else str(raw), schema)
    except Exception as exc:  # repair must never take a leg down
        return Mended(raw, error=f"the arguments could not be read ({type(exc).__name__})")


def _mend(raw: str, schema: dict[str, Any] | None) -> Mended:
    fixes: list[str] = []
    value = _parse(raw, fixes)
    if not isinstance(value, dict):
        return Mended(raw, error="the arguments must be a JSON object of named parameters")
    if isinstance(schema, dict):
        value = _fit(value, schema, fixes)
        problem = _validate(value, schema)
        if problem:
            return Mended(_dump(value) if fixes else raw, tuple(dict.fromkeys(fixes)), problem)
    if not fixes:
        return Mended(raw)
    return Mended(_dump(value), tuple(dict.fromkeys(fixes)))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- syntax ------------------------------------------------------------------------------------

def _parse(raw: str, fixes: list[str]) -> Any:
    if not raw.strip():
        if raw:
            fixes.append("syntax")
        return {}  # the engine reads no arguments as {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = _repair_syntax(raw)
        fixes.append("syntax")
    if isinstance(value, str) and value.strip()[:1] == "{":  # the object sent as a string
        try:
            inner = json.loads(value)
        except ValueError:
            inner = _repair_syntax(value)
        if isinstance(inner, dict):
            fixes.append("double_encoded")
            return inner
    return value


def _repair_syntax(text: str) -> Any:
    import json_repair  # the library (this module is orch_plugins.json_repair)

    if any(q in text for q in "“”„‟‘’‚‛"):
        text = _SMART_OPEN.sub(lambda m: m[1] + ('"' if m[2] in _DOUBLE_SMART else "'"), text)
        text = _SMART_CLOSE.sub(lambda m: ('"' if m[1] in _DOUBLE_SMART else "'") + m[2], text)
    return json_repair.loads(text)


# -- fitting the schema --------------------------------------------------------------------------

def _norm(name: str) -> str:
    """A key without its case style: filePath, file_path, file-path and FILE PATH all agree."""
    return re.sub(r"[\W_]+", "", name).casefold()


def _fit(value: Any, schema: Any, fixes: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    value = _coerce(value, schema, fixes)
    props = schema.get("properties")
    if isinstance(value, dict) and isinstance(props, dict):
        value = _rename_keys(value, props, fixes)
        return {k: _fit(v, props[k], fixes) if k in props else v for k, v in value.items()}
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_fit(v, items, fixes) for v in value]
    return value


def _rename_keys(obj: dict[str, Any], props: dict[str, Any], fixes: list[str]) -> dict[str, Any]:
    if all(k in props for k in obj):
        return obj
    by_norm: dict[str, list[str]] = {}
    for name in props:
        by_norm.setdefault(_norm(name), []).append(name)
    out: dict[str, Any] = {}
    for key, val in obj.items():
        if key not in props:
            found = by_norm.get(_norm(key), [])
            if len(found) == 1 and found[0] not in obj and found[0] not in out:
                out[found[0]] = val
                fixes.append("key_case")
                continue
        out[key] = val
    return out


def _coerce(value: Any, schema: dict[str, Any], fixes: list[str]) -> Any:
    """The one value the schema can mean, or ``value`` untouched when there is doubt."""
    enum = schema.get("enum")
    if isinstance(value, str) and isinstance(enum, list) and value not in enum:
        same = [e for e in enum if isinstance(e, str) and e.casefold() == value.casefold()]
        if len(same) == 1:
            fixes.append("coerced")
            return same[0]
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    real = [t for t in types if t != "null"]
    if len(real) != 1 or value is None:
        return value
    new = _as_type(value, real[0])
    if new is not _NO:
        fixes.append("coerced")
        return new
    return value


_NO = object()


def _as_type(value: Any, kind: str) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if kind == "number" and _NUMBER.fullmatch(text):
            number = json.loads(text)
            return number if math.isfinite(number) else _NO
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if (kind, text[:1]) in (("object", "{"), ("array", "[")):
            try:
                inner = json.loads(text)
            except ValueError:
                return _NO
            return inner if isinstance(inner, dict if kind == "object" else list) else _NO
        return _NO
    if isinstance(value, bool):
        return _NO
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "string" and isinstance(value, int):
        return str(value)
    return _NO


# -- validation ----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _validator(schema_key: str):
    import jsonschema

    schema = json.loads(schema_key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None  # the tool's own schema is broken: not the model's fault, do not judge
    return cls(schema)


_BY_ID: dict[int, tuple[dict[str, Any], Any]] = {}  # id(schema) -> (schema, validator)


def _validator_of(schema: dict[str, Any]):
    """The validator for a tool's schema; a tool keeps its schema object, so look it up by
    identity before paying for the canonical JSON."""
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):
        validator = None
    if len(_BY_ID) >= 1024:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, validator)
    return validator


def _validate(value: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What does not fit ``schema`` (the three most telling problems), or None."""
    validator = _validator_of(schema)
    if validator is None:
        return None
    from jsonschema.exceptions import relevance

    errors = sorted(validator.iter_errors(value), key=relevance, reverse=True)[:3]
    problems = []
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path)
        message = error.message if len(error.message) <= _MAX_ERROR else (
            error.message[:_MAX_ERROR] + "…")
        problems.append(f"{message} (at {where})" if where else message)
    return "; ".join(problems) or None


def signature(schema: dict[str, Any] | None) -> str:
    """``path: string (required), limit: integer``: what a rejected call is told to send."""
    props = (schema or {}).get("properties")
    if not isinstance(props, dict) or not props:
        return "{}"
    required = set((schema or {}).get("required") or [])
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        kind = "|".join(kind) if isinstance(kind, list) else kind
        parts.append(f"{name}: {kind}{' (required)' if name in required else ''}")
    return ", ".join(parts)


# -- the hook ------------------------------------------------------------------------------------

def _tool_name(name: str, roster: dict[str, Any]) -> str:
    if name in roster:
        return name
    found = [t for t in roster if _norm(t) == _norm(name)]
    return found[0] if len(found) == 1 else name


@hookimpl(wrapper=True, trylast=True)
def after_response(leg, request, response):
    """A wrapper, so it mends the calls the whole pipeline ends with — native ones, ones the
    text_tools plugin lifted from text, ones any plugin added — just before the engine runs
    them."""
    response = yield
    return _mend_calls(leg, request, response)


def _mend_calls(leg, request, response):
    if not response.tool_calls or not request.tools:
        return None  # no tools were offered: the engine runs nothing
    from orchestrator.engine.tool_calls import REJECTED_ARGUMENTS
    from orchestrator.request import ToolCall

    state = leg.state.setdefault("json_repair", {"repairs": 0, "kinds": {}})
    calls, changed = [], False
    for call in response.tool_calls:
        name = _tool_name(call.name, leg.tools)
        tool = leg.tools.get(name)
        if tool is None:
            calls.append(call)  # the engine tells the model which tools exist
            continue
        mended = mend(call.arguments, tool.parameters)
        fixes = list(mended.fixes) + (["tool_name"] if name != call.name else [])
        if mended.error:
            message = (f"bad arguments for {name}: {mended.error}; expected "
                       f"{signature(tool.parameters)}. Fix the arguments and call {name} again.")
            arguments = json.dumps({REJECTED_ARGUMENTS: message, "sent": call.arguments[:1000]},
                                   ensure_ascii=False)
            fixes.append("rejected")
        else:
            arguments = mended.text
            if fixes:
                state["repairs"] += 1
        for kind in fixes:
            state["kinds"][kind] = state["kinds"].get(kind, 0) + 1
        if name != call.name or arguments != call.arguments:
            changed = True
            call = ToolCall(id=call.id, name=name, arguments=arguments)
        calls.append(call)
    if not changed:
        return None
    if state["repairs"]:
        leg.set("json_repairs", state["repairs"])
    leg.set("json_repair_kinds", dict(sorted(state["kinds"].items())))
    return response.evolve(tool_calls=tuple(calls))
