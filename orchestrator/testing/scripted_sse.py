"""A chat completion as the server-sent events OpenAI streams (``"stream": true``)."""

from __future__ import annotations

import json
import re
from typing import Any


def stream_events(completion: dict[str, Any], include_usage: bool) -> list[str]:
    """The ``data:`` payloads for ``completion``: a role chunk, the reasoning, the text word by
    word, each tool call (name, then arguments), the finish, the usage if asked, [DONE]."""
    base = {"id": completion["id"], "object": "chat.completion.chunk",
            "created": completion["created"], "model": completion["model"],
            "system_fingerprint": None}
    choice = completion["choices"][0]
    message = choice["message"]

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
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append(json.dumps({**base, "choices": [], "usage": completion["usage"]}))
    events.append("[DONE]")
    return events
