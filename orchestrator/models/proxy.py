"""What a shared LiteLLM proxy tells its clients, beyond a plain OpenAI answer.

A team points every orch at one gateway (docs/team.md). The proxy prices each answer with the
team's own prices, discounts and margins, and says the dollars it charged the key in a
response header; it also refuses requests on the team's behalf. Both are read here:

- :func:`reported_cost`: ``x-litellm-response-cost`` — the cost source ``reported``. The
  proxy leaves the header out when it knows no price, so the cost stays unknown then.
- :func:`refusal`: the proxy's own refusals, by the ``type`` of its error body (LiteLLM's
  ``ProxyErrorTypes``), each a reason of its own that no retry fixes. The rows below are the
  bodies litellm 1.110.2's proxy sent in tests/test_gateway.py:

  ====== ============================== ==================================================
  status ``error.type``                 reason
  ====== ============================== ==================================================
  422    ``budget_exceeded``            ``budget_exceeded`` (429 when the team sets
                                        ``budget_exceeded_status_code: 429``; same type)
  403    ``key_model_access_denied``    ``model_not_allowed`` (and the team/user/org/...
                                        variants: the same check one level up)
  ====== ============================== ==================================================

  Its 429 for a deployment's rpm limit (``throttling_error``) is an ordinary ``rate_limited``
  with the wait in ``llm_provider-retry-after``: the rate gate rides it out (ratelimit.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

COST_HEADER = "x-litellm-response-cost"
# litellm's client keeps an OpenAI-compatible server's headers twice: as sent, and prefixed.
_PREFIX = "llm_provider-"

# No one chat completion costs this much (a million output tokens of the dearest model is a few
# hundred dollars): a larger figure is a broken header, not a price.
MAX_REPORTED_USD = 10_000.0

BUDGET_EXCEEDED, MODEL_NOT_ALLOWED = "budget_exceeded", "model_not_allowed"
_REFUSALS = {
    "budget_exceeded": BUDGET_EXCEEDED,
    **{f"{who}_model_access_denied": MODEL_NOT_ALLOWED
       for who in ("key", "team", "user", "customer", "org", "project", "agent")},
}
# "LiteLLM Virtual Key: <sha256 of the key>, key_alias: ..." — the key's hash says nothing a
# reader needs and names the key for good: it is withheld.
_KEY_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _headers_of(raw: Any) -> list[Any]:
    """Every header mapping litellm kept for ``raw``, most direct first."""
    hidden = getattr(raw, "_hidden_params", None) or {}
    found = [getattr(raw, "_response_headers", None), hidden.get("headers"),
             hidden.get("additional_headers")]
    return [h for h in found if h is not None and hasattr(h, "get")]


def reported_cost(raw: Any) -> float | None:
    """The dollars the gateway charged for this answer, or None when it said nothing usable
    (no header, not a number, negative, not finite, absurd: never guessed)."""
    for headers in _headers_of(raw):
        for name in (COST_HEADER, _PREFIX + COST_HEADER):
            value = headers.get(name)
            if value is None:
                continue
            try:
                cost = float(value)
            except (TypeError, ValueError):
                return None
            return cost if math.isfinite(cost) and 0 <= cost <= MAX_REPORTED_USD else None
    return None


def refusal(body: Any, message: str) -> tuple[str, str] | None:
    """``(reason, message)`` when the error body is one of the proxy's own refusals."""
    from orchestrator.models.ratelimit import error_of, parse_body

    error = error_of(parse_body(body))
    kind = str(error.get("type") or "").lower()
    reason = _REFUSALS.get(kind)
    if reason is None:
        return None
    from orchestrator.security.secrets import scrub

    text = scrub(str(error.get("message") or message))
    return reason, _KEY_HASH.sub("<key hash>", " ".join(text.split()))[:500]
