"""The JSON bodies the scripted server sends: a chat completion built from a :class:`Reply`,
and error bodies shaped like OpenAI's so litellm maps them to the right exception."""

from __future__ import annotations

import json
import time
from typing import Any

from orchestrator.testing.scripted_reply import Reply, tokens

# Default error bodies, shaped like OpenAI's so litellm maps them to the right exception.
ERROR_DEFAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: ("The model does not exist or you do not have access to it.",
          "invalid_request_error", "model_not_found"),
    429: ("Rate limit reached for requests. Please try again later.", "requests",
          "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
    502: ("Bad gateway.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}
QUOTA_MESSAGE = ("You exceeded your current quota, please check your plan and billing "
                 "details.")


def error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def scripted_error(reply: Reply) -> dict[str, Any]:
    """The error body for a non-200 ``reply``: its own fields over the status's defaults."""
    message, type_, code = ERROR_DEFAULTS.get(
        reply.status, (f"Error {reply.status}", "server_error", None))
    code = reply.error_code or code
    if code == "insufficient_quota":
        message, type_ = QUOTA_MESSAGE, "insufficient_quota"
    return error_body(reply.error_message or message, reply.error_type or type_, code)


def retry_after_header(seconds: float) -> str:
    """A Retry-After value: whole seconds as an integer, as providers send them."""
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def raw_body(reply: Reply) -> bytes:
    """``reply.body`` as sent: a dict or list as JSON, str or bytes as they are."""
    if isinstance(reply.body, bytes):
        return reply.body
    return reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode()


def completion(seq: int, key: str, body: dict[str, Any], reply: Reply,
               prompt_tokens: int) -> dict[str, Any]:
    """The chat completion answering ``body`` with ``reply``; ``seq`` numbers its ids."""
    tool_calls = []
    for i, call in enumerate(reply.tool_calls or []):
        args = call.get("arguments", {})
        tool_calls.append({
            "id": call.get("id") or f"call_{seq:06d}_{i}",
            "type": "function",
            "function": {"name": call["name"],
                         "arguments": args if isinstance(args, str) else json.dumps(args)},
        })
    usage_in = dict(reply.usage or {})
    reasoning_tokens = usage_in.pop("reasoning_tokens",
                                    tokens(reply.reasoning) if reply.reasoning else 0)
    cached_tokens = usage_in.pop("cached_tokens", 0)
    prompt = usage_in.pop("prompt_tokens", prompt_tokens)
    visible = reply.text + "".join(c["function"]["arguments"] for c in tool_calls)
    completion_tokens = usage_in.pop("completion_tokens",
                                     max(1, tokens(visible)) + reasoning_tokens)
    if "total_tokens" not in usage_in:  # hostile figures (strings, None) have no sum
        try:
            usage_in["total_tokens"] = prompt + completion_tokens
        except TypeError:
            usage_in["total_tokens"] = None
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": usage_in.pop("total_tokens"),
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens,
                                      "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0},
        **usage_in,
    }
    message: dict[str, Any] = {"role": "assistant", "content": reply.text,
                               "refusal": None}
    if tool_calls:
        message["content"] = reply.text or None
        message["tool_calls"] = tool_calls
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    doc = {
        "id": f"chatcmpl-scripted{seq:06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or key),
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish}],
        "usage": usage,
    }
    if reply.no_usage:
        del doc["usage"]
    return doc
