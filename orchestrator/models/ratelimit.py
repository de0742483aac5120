"""Reading a provider's "slow down" answer: wait and retry, or stop.

A 429 means two unrelated things: too fast (waiting fixes it) or nothing left to spend
(waiting never does). Providers say which in the error body, not always in the status, and
often put the wait there too. This reads headers, body and message, in that order, into a
:class:`Limit`; the rate gate (gate.py) retries ``rate_limited`` and ``overloaded`` only.

The shapes, as the providers document them (tests/test_rate_limits.py holds one fixture each):

- OpenAI - https://platform.openai.com/docs/guides/error-codes : 429 ``rate_limit_exceeded``
  ("... Please try again in 6.4s."), 429 ``insufficient_quota`` (and the billing codes
  ``credit_balance_exhausted``, ``*_spend_limit_exceeded``, ``organization_usage_limit_exceeded``).
- Anthropic - https://docs.anthropic.com/en/api/errors : ``{"type": "error", "error": {"type":
  "rate_limit_error", ...}}`` with a ``retry-after`` header; 529 ``overloaded_error``; a 429 whose
  ``error.details.error_code`` is ``enforced_spend_limit_reached`` (a monthly cap); 400 "Your
  credit balance is too low".
- Gemini - https://ai.google.dev/gemini-api/docs/troubleshooting : 429 ``RESOURCE_EXHAUSTED``,
  "You exceeded your current quota ...", the wait in ``details[].retryDelay`` of a
  ``google.rpc.RetryInfo`` ("46s"): per-minute quotas say so and are retried.
- Groq - https://console.groq.com/docs/errors , /docs/rate-limits : 429 ``rate_limit_exceeded``
  with a ``retry-after`` header and "Please try again in 9m38.016s." in the message.
- OpenRouter - https://openrouter.ai/docs/api-reference/errors : ``{"error": {"code": 429 |
  402, "message", "metadata"}}``; 402 is out of credits.
- A LiteLLM proxy (docs/team.md) - a deployment over its rpm answers 429 ``throttling_error``
  with the wait in ``llm_provider-retry-after`` (the proxy prefixes the headers it forwards);
  ``budget_exceeded`` is a spend cap. Its own refusals get reasons of their own (gateway.py).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

RATE_LIMITED, QUOTA, OVERLOADED = "rate_limited", "quota", "overloaded"

# Codes that mean nothing is left to spend: waiting never fixes them.
HARD_CODES = frozenset({
    "insufficient_quota", "credit_balance_exhausted", "organization_spend_limit_exceeded",
    "project_spend_limit_exceeded", "organization_usage_limit_exceeded",
    "billing_hard_limit_reached", "billing_not_active", "enforced_spend_limit_reached",
    "budget_exceeded", "payment_required", "insufficient_credits",
})
HARD_WORDS = re.compile(
    r"credit balance|insufficient (credits|funds|balance)|out of credits|add (more )?credits|"
    r"spend(ing)?[ _-]?(cap|limit)|billing (hard )?limit|budget (has been )?exceeded|"
    r"exceeded your (current )?budget|payment required", re.I)
OVERLOAD_CODES = frozenset({"overloaded_error", "overloaded"})

# "try again in 20s", "Please try again in 9m38.016s", "Please retry in 46.2s", "in 120ms"
_WAIT_IN_TEXT = re.compile(r"(?:try again|retry)(?: after| in)\s+"
                           r"((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s)\s*)+)", re.I)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)", re.I)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Limit:
    reason: str  # rate_limited | quota | overloaded
    retry_after: float | None  # seconds the provider asked to wait, if it said


def duration(text: Any) -> float | None:
    """Seconds in "46s", "1.5s", "9m38.016s", "120ms", "10h17m5.7s" or a bare number."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text) if text >= 0 else None
    if not isinstance(text, str):
        return None
    text = text.strip()
    try:
        value = float(text)
        return value if value >= 0 else None
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or _DURATION_PART.sub("", text).strip():
        return None
    return sum(float(n) * _UNIT_S[unit.lower()] for n, unit in parts)


def parse_body(text: Any) -> Any:
    """A provider's error body as JSON when it is JSON text (bytes or str), None when it is
    other text, and anything else (litellm's already-parsed ``exc.body``) as it is."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return None
    return text


def error_of(body: Any) -> dict:
    """The provider's error object: ``{"error": {...}}``, ``[{"error": {...}}]`` (Gemini's
    REST list) or the object itself (litellm's ``exc.body``); empty when there is none."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body


def _codes(error: dict) -> set[str]:
    details = error.get("details")
    values = [error.get("code"), error.get("type"), error.get("status")]
    if isinstance(details, dict):
        values.append(details.get("error_code"))
    return {str(v).lower() for v in values if v is not None}


def _header(headers: Any, name: str) -> str | None:
    try:
        return headers.get(name) or headers.get(name.title())
    except AttributeError:
        return None


def _wait_from_headers(headers: Any, now: float) -> float | None:
    ms = _header(headers, "retry-after-ms")
    if ms is not None and duration(ms) is not None:
        return duration(ms) / 1000
    value = _header(headers, "retry-after") or _header(headers, "llm_provider-retry-after")
    if value is None:
        return None
    seconds = duration(value)
    if seconds is not None:
        return seconds
    try:  # an HTTP date
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _wait_from_body(error: dict, body: Any, now: float) -> float | None:
    details = error.get("details")
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict) and item.get("retryDelay") is not None:
            wait = duration(item["retryDelay"])
            if wait is not None:
                return wait
    for holder in (error, body if isinstance(body, dict) else {}):
        for key in ("retry_after", "retryAfter", "retry_after_seconds"):
            wait = duration(holder.get(key))
            if wait is not None:
                return wait
    metadata = error.get("metadata")
    headers = metadata.get("headers") if isinstance(metadata, dict) else None
    reset = _header(headers, "X-RateLimit-Reset") if isinstance(headers, dict) else None
    if reset is not None:  # OpenRouter: the window's end, in epoch milliseconds
        try:
            return max(0.0, float(reset) / 1000 - now)
        except (TypeError, ValueError):
            return None
    return None


def classify(status: int | None, headers: Any = None, body: Any = None, message: str = "",
             *, now: float | None = None) -> Limit | None:
    """What a failed call means for waiting, or None when it is no limit at all."""
    now = time.time() if now is None else now
    body = parse_body(body)
    error = error_of(body)
    codes = _codes(error)
    text = " ".join(filter(None, [message, str(error.get("message") or "")]))
    if codes & OVERLOAD_CODES or status == 529:
        return Limit(OVERLOADED, _wait_from_headers(headers, now))
    if codes & HARD_CODES or status == 402:
        return Limit(QUOTA, None)
    if status != 429 and not codes & {"rate_limit_exceeded", "rate_limit_error",
                                      "resource_exhausted"}:
        return Limit(QUOTA, None) if HARD_WORDS.search(text) else None
    wait = _wait_from_headers(headers, now)
    if wait is None:
        wait = _wait_from_body(error, body, now)
    if wait is None:
        match = _WAIT_IN_TEXT.search(text)
        wait = duration(match.group(1)) if match else None
    if wait is None and HARD_WORDS.search(text):
        return Limit(QUOTA, None)  # a spend cap said in words, with no time to come back
    return Limit(RATE_LIMITED, wait)
