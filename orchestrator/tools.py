"""Tools a leg's model may call. Plugins contribute them through the ``register_tools`` hook."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TOOL_LIMIT_S = 60.0  # a plain (blocking) tool function's hard deadline per call


@dataclass
class Tool:
    """A callable the model can ask for. ``function`` takes the parsed arguments as keywords
    and returns text (or something JSON-serialisable); it may be async."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    plugin: str | None = None  # set by the engine: which plugin contributed it
    builtin: bool = False  # set by the engine: contributed by a built-in plugin
    meta: dict[str, Any] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.parameters}}

    async def run(self, arguments: dict[str, Any]) -> str:
        """A plain function runs on its own daemon thread with a hard deadline,
        ``meta["max_seconds"]`` (default TOOL_LIMIT_S), so blocking work never stops the
        event loop and the other legs. A built-in's async function is awaited (cancellation
        ends it); a third party's runs through the runner (plugin_host/boundary.py): on the
        plugin loop within the same deadline, abandoned past it, its exits caught."""
        if not self.builtin:
            from orchestrator.plugin_host.boundary import run_tool

            return await run_tool(self.function, arguments, self.meta, TOOL_LIMIT_S,
                                  (self.plugin or "?", f"tool {self.name}"))
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**arguments)  # runner: a built-in's tool
        else:
            from orchestrator import tool_thread

            seconds = float(self.meta.get("max_seconds") or TOOL_LIMIT_S)
            result = await tool_thread.run_sync(
                lambda: self.function(**arguments),  # runner: a built-in's tool, a worker
                seconds=seconds)
        if inspect.isawaitable(result):
            result = await result
        from orchestrator.plugin_host.boundary import as_text

        return as_text(result)

    @classmethod
    def from_function(cls, function: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None) -> Tool:
        """A tool from a plain function: its name, its docstring's summary as the
        description, and a JSON Schema inferred from the type hints and the docstring's
        parameter descriptions (Google, reST or NumPy style). A parameter with a default, or
        typed ``X | None``, is optional; the rest are required."""
        name = name or getattr(function, "__name__", None)
        if not name or name == "<lambda>":
            raise TypeError("Tool.from_function: this callable has no usable name; pass name=")
        schema, summary = function_schema(function)
        return cls(name=name, description=description or summary, parameters=schema,
                   function=function)


def function_schema(function: Callable[..., Any]) -> tuple[dict[str, Any], str]:
    """(JSON Schema of ``function``'s keyword arguments, the docstring's description).
    Types map through pydantic (str, int, float, bool, list[...], Literal, dict, ...)."""
    import typing

    import docstring_parser
    from pydantic import TypeAdapter

    doc = docstring_parser.parse(inspect.getdoc(function) or "")
    described = {p.arg_name: p.description for p in doc.params if p.description}
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # a forward reference that does not resolve: take the hints as written
        hints = getattr(function, "__annotations__", {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in inspect.signature(function).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{function.__name__}: parameter {pname!r} is positional-only; "
                            "a tool is called with keyword arguments")
        hint = hints.get(pname, Any)
        prop = _strip_null(TypeAdapter(hint).json_schema())
        nullable = prop.pop("_nullable", False)
        if pname in described:
            prop["description"] = " ".join(described[pname].split())
        if param.default is not param.empty:
            if param.default is not None:
                prop["default"] = param.default
        elif not nullable:
            required.append(pname)
        properties[pname] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    summary = " ".join(filter(None, [doc.short_description, doc.long_description]))
    return schema, " ".join(summary.split())


def _strip_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``X | None`` becomes X, marked optional: models send an absent argument, not null."""
    branches = schema.get("anyOf")
    if branches and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        others = {k: v for k, v in schema.items() if k != "anyOf"}
        inner = rest[0] if len(rest) == 1 else {"anyOf": rest}
        return {**inner, **others, "_nullable": True}
    return schema

