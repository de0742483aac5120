"""A chat completion as the server-sent events OpenAI streams (``"stream": true``)."""

from __future__ import annotations

import json
import re
from typing import Any


def stream_events(completion: dict[str, Any], include_usage: bool) -> list[str]:
    """The ``data:`` payloads for ``completion``: a role chunk, the reasoning, the text word by
    word, each tool call (name, then arguments), the finish, the usage if asked (and the
    completion has one: as it is, a hostile one too), [DONE]."""
    base = {"id": completion.get("id", "chatcmpl-scripted"), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "m"),
            "system_fingerprint": None}
    choice = completion["choices"][0]
    message = choice.get("message") or {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        obj = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": finish_reason}]}
        if include_usage:
            obj["usage"] = None
        return json.dumps(obj)

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        events.append(chunk({"reasoning_content": message["reasoning_content"]}))
    for piece in re.findall(r"\s*\S+\s*|\s+", message.get("content") or ""):
        events.append(chunk({"content": piece}))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"],
                                                          "arguments": ""}}]}))
        events.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": call["function"]["arguments"]}}]}))
    events.append(chunk({}, choice.get("finish_reason")))
    if include_usage and "usage" in completion:  # a provider that reports none sends none
        events.append(json.dumps({**base, "choices": [], "usage": completion["usage"]}))
    events.append("[DONE]")
    return events


def streamable(body: Any) -> bool:
    """Whether a scripted raw ``body`` is a completion (its choices hold a message) that a
    streamed request gets as events; any other body goes as it is (a broken reply)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict))
