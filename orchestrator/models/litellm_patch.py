"""The one place orch corrects litellm: a 422 that names no parameter is not sent again, and
usage litellm cannot read does not cost a billed answer.

With ``drop_params`` on (runtime.py), litellm's OpenAI-compatible client answers a 422 by
dropping the parameters the error names and sending the request once more. A 422 that names
none — a LiteLLM proxy's ``budget_exceeded`` (gateway.py) — went out twice, identical, and the
second refusal ended as an empty reply ("no choices"), the proxy's reason lost. Here the
helper raises the original 422 when it would drop nothing; a 422 naming parameters (a FastAPI
validation error from vLLM and friends) is still mended and resent as before.

litellm builds a reply's usage with ``litellm.Usage(**usage)``; a count that is not an int
(``12.5``, ``"abc"``, ``1e20``) made that raise, and the whole answer - already billed - was
lost as "Invalid response object". :func:`honest_usage` reads each count first
(:mod:`orchestrator.models.token_counts`), passes litellm a safe int and keeps what it fixed on the
usage (``orch_unreadable``), so ``server.usage_of`` marks the answer ``suspect``. A usage
built with no counts at all is marked ``orch_absent``: the reply carried none.

Before litellm sees a reply, the OpenAI SDK validates its usage leniently: ``"prompt_tokens":
true`` became 1 token, priced as declared. :func:`strict_counts` makes the SDK's usage model
strict, so a count that is no number reaches :func:`honest_usage` as it was sent (the SDK
then builds the usage unvalidated) and the answer is ``suspect``.
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


_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
_DETAILS = (("prompt_tokens_details", "cached_tokens"),
            ("completion_tokens_details", "reasoning_tokens"))


def _readable(kwargs: dict[str, Any]) -> dict[str, str]:
    """Replace, in ``kwargs``, each count litellm could not read; return what was wrong."""
    from orchestrator.models.token_counts import read_count

    problems: dict[str, str] = {}

    def fix(holder: dict[str, Any], key: str) -> None:
        value = holder.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)
                             and value >= 0):
            return
        holder[key], problem = read_count(value)
        if problem is not None:
            problems[key] = problem

    for key in _COUNTS:
        fix(kwargs, key)
    given = [k for k in _COUNTS[:2] if kwargs.get(k) is not None]
    if given:  # a usage with one count and not the other: the other was not reported
        for key in _COUNTS[:2]:
            if key not in given:
                problems[key] = "is missing"
    for details, key in _DETAILS:
        if isinstance(kwargs.get(details), dict):
            kwargs[details] = dict(kwargs[details])
            fix(kwargs[details], key)
    return problems


def _usage_object(convert: Any) -> Any:
    """``convert`` (litellm's reply-to-response converter), handed a reply whose ``usage`` is
    no object (``"abc"``, ``5``, a list) as if it had none, the value kept for the note:
    litellm's ``Usage(**usage)`` would raise on it and lose the answer."""
    if getattr(convert, "_orch_wrapped", False):
        return convert

    def wrapped(response_object: Any = None, *args: Any, **kwargs: Any) -> Any:
        usage = response_object.get("usage") if isinstance(response_object, dict) else None
        if usage is not None and not isinstance(usage, dict):
            response_object = {**response_object,
                               "usage": {"orch_unreadable": {"usage": f"{usage!r:.40}"}}}
        return convert(response_object, *args, **kwargs)

    wrapped._orch_wrapped = True  # type: ignore[attr-defined]
    return wrapped


def strict_counts() -> None:
    """The OpenAI SDK's usage model validated strictly (idempotent): a bool, text or fraction
    is no int there, so the SDK keeps the value as sent instead of coercing ``true`` to 1."""
    try:
        from openai.types.completion_usage import CompletionUsage
    except Exception:  # another SDK layout: litellm's Usage is still corrected
        return
    if CompletionUsage.model_config.get("strict"):
        return
    CompletionUsage.model_config["strict"] = True
    CompletionUsage.model_rebuild(force=True)


def honest_usage(lm: Any) -> None:
    """Wrap ``litellm.Usage.__init__`` and the OpenAI-compatible client's converter
    (idempotent): see the module's docstring."""
    try:
        from litellm.llms.openai import openai as handler
    except Exception:  # another litellm layout: Usage alone is corrected
        handler = None
    if handler is not None and hasattr(handler, "convert_to_model_response_object"):
        handler.convert_to_model_response_object = _usage_object(
            handler.convert_to_model_response_object)
    usage = getattr(lm, "Usage", None)
    original = getattr(usage, "__init__", None)
    if original is None or getattr(original, "_orch_wrapped", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        problems = _readable(kwargs)
        absent = not args and not any(kwargs.get(k) is not None for k in _COUNTS)
        original(self, *args, **kwargs)
        if problems:
            self.orch_unreadable = {**(getattr(self, "orch_unreadable", None) or {}),
                                    **problems}
        if absent:
            self.orch_absent = True

    init._orch_wrapped = True  # type: ignore[attr-defined]
    usage.__init__ = init
