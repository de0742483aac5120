"""The shape ``config.json`` must have, checked when it is loaded.

A wrong type deep in the file (``"providers": []``, ``"base_url": 5``) would otherwise
surface later as an AttributeError far from its cause. Checked here, it is one line naming
the file, the key path and the type expected. Unknown keys are allowed (plugins and later
versions add their own); known keys must have their type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

_STR = {"type": "string"}
_NUM = {"type": "number", "minimum": 0}
_POS_INT = {"type": "integer", "minimum": 1}
_STRINGS = {"type": "array", "items": _STR}


def _object_of(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": schema}


PROVIDER = {
    "type": "object",
    "properties": {
        "base_url": _STR, "api_key_env": _STR,
        "input_cost_per_mtok": _NUM, "output_cost_per_mtok": _NUM,
        "max_output_tokens": _POS_INT, "context_window": _POS_INT,
        "max_concurrent": _POS_INT, "free": {"type": "boolean"},
        "supports_tools": {"type": "boolean"}, "supports_reasoning": {"type": "boolean"},
    },
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "providers": _object_of(PROVIDER),
        "aliases": _object_of(_STR),
        "councils": _object_of(_STRINGS),
        "variants": _object_of({"type": "object"}),
        "plugins": {"type": "object",
                    "properties": {"enabled": _STRINGS, "disabled": _STRINGS,
                                   "hook_deadline_s": _NUM, "dir": _STR}},
        "plugin_config": _object_of({"type": "object"}),
        "defaults": {"type": "object",
                     "properties": {"models": _STRINGS, "chair": _STR,
                                    "max_concurrent": _POS_INT}},
        "local": {"type": "object"},
        "daemon": _STR,  # "auto" (default), "manual", "off": daemon/autostart.py
        "serve": {"type": "object", "properties": {"idle_minutes": _NUM}},
    },
}

_NAMES = {"object": "an object ({...})", "array": "a list ([...])", "string": "a string",
          "number": "a number", "integer": "a whole number", "boolean": "true or false"}


def validate(data: Any, path: Path) -> None:
    """Raise OrchError naming ``path``, the key path and the expected type of the first
    problem (the shallowest, in file order)."""
    problem = first_problem(data, SCHEMA)
    if problem is not None:
        where, message = problem
        raise OrchError(f"config file {path}: {where or '(the whole file)'} {message}; "
                        "fix it (or remove the key)")


def first_problem(value: Any, schema: dict[str, Any], where: str = "") -> tuple[str, str] | None:
    """The subset of JSON Schema SCHEMA and plugins' CONFIG_SCHEMA use (type, properties,
    additionalProperties, items, minimum, exclusiveMinimum), walked by hand: jsonschema's import alone would cost ``orch --help`` a tenth of
    a second on every run. tests/test_config_schema.py checks it agrees with jsonschema."""
    wanted = schema.get("type")
    if wanted is not None and not _is(value, wanted):
        return where, f"must be {_NAMES[wanted]}, not {_kind(value)}"
    if "minimum" in schema and value < schema["minimum"]:
        return where, f"must be at least {schema['minimum']}, not {value!r}"
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return where, f"must be more than {schema['exclusiveMinimum']}, not {value!r}"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                found = first_problem(item, sub, f"{where}.{key}" if where else str(key))
                if found:
                    return found
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            found = first_problem(item, schema["items"], f"{where}[{n}]")
            if found:
                return found
    return None


def _is(value: Any, wanted: str) -> bool:
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if wanted == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    return isinstance(value, {"object": dict, "array": list, "string": str,
                              "boolean": bool}[wanted])


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            int: "a number", float: "a number", type(None): "null"}.get(type(value),
                                                                         type(value).__name__)
