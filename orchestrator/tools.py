"""Tools a leg's model may call. Plugins contribute them through the ``register_tools`` hook."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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
        result = self.function(**arguments)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else json.dumps(result, default=str)
