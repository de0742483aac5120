"""The one place orch corrects litellm: a 422 that names no parameter is not sent again.

With ``drop_params`` on (runtime.py), litellm's OpenAI-compatible client answers a 422 by
dropping the parameters the error names and sending the request once more. A 422 that names
none — a LiteLLM proxy's ``budget_exceeded`` (gateway.py) — went out twice, identical, and the
second refusal ended as an empty reply ("no choices"), the proxy's reason lost. Here the
helper raises the original 422 when it would drop nothing; a 422 naming parameters (a FastAPI
validation error from vLLM and friends) is still mended and resent as before.
"""

from __future__ import annotations

from typing import Any


def no_blind_resend(lm: Any) -> None:
    """Wrap litellm's 422 helper where its OpenAI client calls it (idempotent)."""
    try:
        from litellm.llms.openai import openai as handler
    except Exception:  # another litellm layout: nothing to correct
        return
    original = getattr(handler, "drop_params_from_unprocessable_entity_error", None)
    if original is None or getattr(original, "_orch_wrapped", False):
        return

    def drop_or_raise(e: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        new_data = original(e, data, *args, **kwargs)
        if new_data == data:  # nothing named: the same request would only be refused again
            raise e
        return new_data

    drop_or_raise._orch_wrapped = True  # type: ignore[attr-defined]
    handler.drop_params_from_unprocessable_entity_error = drop_or_raise
