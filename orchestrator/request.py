"""What a leg sends and receives, as plain data that plugins can inspect and replace."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    """Token counts as the provider reported them (never estimated)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    # Spelled out: dataclasses.astuple/asdict deep-copy field by field, and a leg adds and
    # writes its usage at every step of every leg.
    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.reasoning_tokens + other.reasoning_tokens,
                     self.cached_tokens + other.cached_tokens)

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "reasoning_tokens": self.reasoning_tokens, "cached_tokens": self.cached_tokens}


@dataclass(frozen=True)
class Request:
    """One model request. Plugins return ``request.evolve(...)`` rather than mutating it."""

    model: str  # the canonical model name (ResolvedModel.name)
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # OpenAI tool schemas, None = no tools
    params: dict[str, Any] = field(default_factory=dict)  # max_tokens, temperature, ...
    step: int = 1
    # "text": the tools are described in the prompt and not sent (a model without native
    # tool calling, plugins/text_tools.py); the leg still runs the calls it lifts.
    tool_format: str = "native"
    # 2: this step's request, built afresh and sent again after the provider rejected the
    # first one's ``tools`` (no answer, nothing billed); each send passes before_request once
    attempt: int = 1

    def __post_init__(self) -> None:
        # By construction: a request's credentials (a plugin's or a variant's headers, URL
        # credentials, query keys) are secrets from the moment it exists, before any log of
        # it is written (a plugin's request.evolve() builds a new one and passes here too).
        from orchestrator.security.secrets import register_params

        register_params(self.params)

    def evolve(self, **changes: Any) -> Request:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = {"model": self.model, "step": self.step, "messages": self.messages,
               "tools": self.tools, "params": self.params, "tool_format": self.tool_format}
        if self.attempt > 1:
            out["attempt"] = self.attempt
        return out


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model wrote

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Response:
    """One model answer, usage and cost normalised by the server."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    cost_source: str = "unknown"  # one of orchestrator.ledger.spend.COST_SOURCES
    reasoning_text: str | None = None
    usage_note: str | None = None  # what was wrong with the provider's usage (suspect)

    def evolve(self, **changes: Any) -> Response:
        return dataclasses.replace(self, **changes)

    def assistant_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return message

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": [c.to_message() for c in self.tool_calls],
                "finish_reason": self.finish_reason, "usage": self.usage.to_dict(),
                "cost_usd": self.cost_usd, "cost_source": self.cost_source}
