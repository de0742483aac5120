"""What the scripted server is told to answer (:class:`Reply`, a script's entries) and what it
saw (:class:`RecordedRequest`). Stdlib only, like the rest of the server."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any


@dataclass
class Reply:
    """One scripted answer. Anything not 200 is sent as an OpenAI-style error body.

    ``usage`` may be partial: missing counts are estimated (prompt: request chars / 4,
    completion: reply chars / 4). ``cached_tokens`` and ``reasoning_tokens`` keys land in
    ``prompt_tokens_details`` / ``completion_tokens_details``.
    """

    text: str = "ok"
    tool_calls: list[dict[str, Any]] | None = None  # {"name", "arguments": dict|str, "id"?}
    usage: dict[str, int] | None = None
    finish_reason: str | None = None  # default "stop", or "tool_calls" when tool_calls
    latency: float = 0.0  # seconds before answering (added to the server's base latency)
    status: int = 200
    error_message: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    retry_after: float | None = None  # sent as a Retry-After header
    hang: bool = False  # never answer; released (connection closed) when the server stops
    drop: bool = False  # close the socket without answering
    reasoning: str | None = None  # message.reasoning_content
    headers: dict[str, str] | None = None  # extra response headers
    no_usage: bool = False  # leave ``usage`` out of the response (a provider that omits it;
    # streamed: no usage chunk, even when ``stream_options.include_usage`` asks for one)
    chunk_delay: float = 0.0  # streamed: seconds between two chunks (text arriving live)
    ignores_stream: bool = False  # a provider that ignores ``"stream": true``: the answer as
    # one plain JSON completion (``Content-Type: application/json``), never server-sent events
    error_body: dict[str, Any] | None = None  # an error status sent with exactly this body
    # sent instead of the completion, for malformed replies: a dict or list goes as JSON
    # (e.g. {"choices": []}), str or bytes as they are (a garbage body)
    body: Any = None

    @classmethod
    def coerce(cls, value: Reply | dict[str, Any] | str) -> Reply:
        """A Reply from a Reply, a dict with Reply's keys, or a bare string (the text)."""
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if isinstance(value, dict):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise ValueError(f"unknown Reply keys: {sorted(unknown)}")
            return cls(**value)
        raise TypeError(f"cannot make a Reply from {type(value).__name__}")


# A dynamic reply: called with the request body and the model's 0-based request number.
ReplyFn = Callable[[dict[str, Any], int], "Reply | dict[str, Any] | str"]


@dataclass
class RecordedRequest:
    """One request as the server saw it. Times are ``time.monotonic()``; headers lower-cased."""

    model: str  # request body's model, ``openai/`` prefix stripped ("" when not a chat call)
    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    t_start: float
    t_end: float | None = None  # None while in flight (or hanging)
    status: int | None = None  # None when dropped or never answered

    @property
    def duration(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_start

    def finish(self, status: int | None) -> None:
        """The answer went out (``status``), or never will (None): the request is over."""
        self.status = status
        self.t_end = time.monotonic()


def model_key(model: str) -> str:
    """Scripts match on the model name without the ``openai/`` litellm routing prefix."""
    return model.removeprefix("openai/")


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """Rough prompt size the server uses for usage and windows: JSON chars of messages+tools / 4."""
    chars = len(json.dumps(body.get("messages") or []))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return math.ceil(chars / 4)


def tokens(text: str) -> int:
    """Rough completion size: chars / 4, as for prompts."""
    return math.ceil(len(text) / 4)
