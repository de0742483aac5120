"""The shared server: the one gateway every leg of a wave (and its chair) calls.

It wraps litellm (imported lazily), passes timeout and retries explicitly so nothing retries
twice behind orch's back, normalises usage and cost, and names every provider failure with one
of a few reasons while keeping the provider's own message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from orchestrator.errors import ProviderError
from orchestrator.intake.admit import Admitted
from orchestrator.models import streamed
from orchestrator.models.addressing import ResolvedModel, register_litellm_keys
from orchestrator.models.proxy import reported_cost
from orchestrator.models.streamed import STREAM_KWARGS
from orchestrator.models.token_counts import MAX_TOKEN_COUNT, read_count
from orchestrator.request import Response, ToolCall, Usage
from orchestrator.security.secrets import register_params, scrub, scrub_values

# Declared providers need *some* key for litellm's OpenAI client; local servers ignore it.
NO_KEY = "sk-no-key-required"


class Server:
    """One per wave. Counts requests in flight so guards and progress can read the load."""

    def __init__(self, *, timeout_s: float = 600.0, max_retries: int = 0,
                 rate_gate: bool = True) -> None:
        from orchestrator.models.gate import HoldLog

        self.timeout_s = timeout_s
        self.max_retries = 0 if rate_gate else max_retries  # never the SDK's and the gate's
        self.rate_gate = rate_gate  # every call through the endpoint's shared gate (gate.py)
        self.holds = HoldLog()  # when and how long the gate held this server's calls
        self.wave_size = 0  # legs the wave(s) on this server launch at once (the gate's floor)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.sent = 0

    def call_kwargs(self, model: ResolvedModel, admitted: Admitted, *,
                    stream: bool = False) -> dict[str, Any]:
        """What litellm is called with: only an admitted request's messages (the intake,
        orchestrator/intake/: credentials, the secret registry, anonymity) are placed in it.
        ``stream``: someone watches the text; the stream is asked for after the request's
        own params, so a param cannot turn it off (nor on)."""
        if not isinstance(admitted, Admitted):
            raise TypeError("the server sends admitted requests only: pass "
                            "orchestrator.intake.admit(request, policy)")
        request = admitted.request
        register_litellm_keys(model)  # the variables litellm sends for this provider
        model.api_key()  # registered as read, before any text below is masked
        kwargs: dict[str, Any] = {
            "model": model.litellm_model,
            "messages": outbound(request.messages),
            "timeout": self.timeout_s,
            "max_retries": self.max_retries,
            "num_retries": 0,
        }
        if request.tools and request.tool_format == "native":  # "text": described in the prompt
            kwargs["tools"] = request.tools
        if model.api_base:
            kwargs["api_base"] = model.api_base
        key = model.api_key()
        if key:
            kwargs["api_key"] = key
        elif model.declared:
            kwargs["api_key"] = NO_KEY
        elif not model.api_base:  # litellm's provider: its variables as arguments, from the
            # run's (orchestrator.keys), never read by litellm from the process's environment
            kwargs.update(litellm_keys(model))
        kwargs.update(litellm_prices(model))
        kwargs.update(request.params)
        for name in STREAM_KWARGS:
            kwargs.pop(name, None)
        if stream:  # the usage in the stream (streamed.py): the ledger stays exact
            kwargs.update(STREAM_KWARGS)
        register_params(kwargs)  # the Request registered its own; the model's are added here
        return kwargs

    async def complete(self, model: ResolvedModel, admitted: Admitted,
                       on_send: Callable[[], None] | None = None,
                       on_text: Callable[[str], None] | None = None) -> Response:
        """One answer for an admitted request (orchestrator.intake.admit). ``on_send`` is
        called for every request that goes on the wire, the rate gate's retries included (a
        leg's ``requests``). With ``on_text`` the answer is streamed (models/streamed.py) and
        ``on_text`` gets each piece of its text as it arrives; without, it is read whole
        (litellm's stream reader costs CPU per chunk: only a watched leg pays it)."""
        from orchestrator.runtime import litellm

        stream = on_text is not None
        kwargs = self.call_kwargs(model, admitted, stream=stream)
        lm = litellm()

        async def send() -> Any:
            self.in_flight += 1
            self.sent += 1
            if on_send is not None:
                on_send()
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                answer = await lm.acompletion(**kwargs)
                if stream:  # read to its end, each piece handed on (streamed.py)
                    answer = await streamed.read(answer, kwargs["messages"], on_text)
                return answer
            except ProviderError:  # the stream read, and found it no answer
                raise
            except Exception as exc:
                raise unreachable(provider_error(exc), model) from None
            finally:
                self.in_flight -= 1

        if self.rate_gate:
            from orchestrator.models.gate import gate_for

            raw = await gate_for(model, wave_size=self.wave_size).call(send, self.holds)
        else:
            raw = await send()
        return normalise(model, raw)


def litellm_keys(model: ResolvedModel) -> dict[str, Any]:
    """The call arguments carrying the variables litellm reads for ``model``'s provider."""
    from orchestrator import keys
    from orchestrator.models import key_names

    return key_names.call_kwargs(model.provider, {
        n: v for n in key_names.model_names(model) if (v := keys.read(n))})


def outbound(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as sent: a registered key value never leaves in one (a tool result, a chair
    packet, a council bundle). The same list when nothing needed masking."""
    out = None
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and scrub_values(content) != content:
            out = out if out is not None else list(messages)
            out[i] = {**message, "content": scrub_values(content)}
    return messages if out is None else out


def normalise(model: ResolvedModel, raw: Any) -> Response:
    """litellm's ModelResponse → Response with the four token counts and an honest cost. A
    reply that is not a usable chat completion is a ``bad_response``, said plainly."""
    choices = getattr(raw, "choices", None)
    if not isinstance(choices, list | tuple) or not choices:
        raise ProviderError("bad_response", f"the reply has no choices ({choices!r:.60})")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ProviderError("bad_response", "the reply's first choice has no message")
    calls = tuple(
        ToolCall(id=c.id or f"call_{i}", name=c.function.name or "",
                 arguments=c.function.arguments or "{}")
        for i, c in enumerate(getattr(message, "tool_calls", None) or [])
    )
    usage, note = usage_of(getattr(raw, "usage", None), usage_bound(model))
    cost, source = cost_of(model, raw, usage, suspect=note is not None)
    if source == "suspect" and note is None:
        note = "the provider's cost was negative or not a number; recomputed from the usage"
    if usage_absent(getattr(raw, "usage", None)) and source not in ("free", "reported"):
        # the answer stands; its cost is not $0 but unknown, so the wave's total is a floor
        cost, source, note = None, "unknown", NO_USAGE
        unreadable = getattr(getattr(raw, "usage", None), "orch_unreadable", None)
        if isinstance(unreadable, dict) and "usage" in unreadable:
            note = (f"the provider's usage {unreadable['usage']} is not an object: this "
                    "answer's tokens and cost are unknown")
    return Response(
        text=message.content or "",
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=usage,
        cost_usd=cost,
        cost_source=source,
        reasoning_text=getattr(message, "reasoning_content", None),
        usage_note=note,
    )


WINDOW_FACTOR = 10  # a count beyond 10x the model's window is impossible


def usage_bound(model: ResolvedModel) -> int:
    """The largest believable token count for one request to ``model``."""
    try:
        from orchestrator import runtime
        from orchestrator.models.catalog import model_info

        declared = runtime.config().providers.get(model.provider) if model.declared else None
        window = model_info(model, declared).context_window
    except Exception:
        window = None
    return min(MAX_TOKEN_COUNT, WINDOW_FACTOR * int(window)) if window else MAX_TOKEN_COUNT


# litellm's names for the counts orch keeps (litellm_patch.honest_usage marks what it fixed)
_LITELLM_NAMES = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens",
                  "cached_tokens": "cached_tokens", "reasoning_tokens": "reasoning_tokens"}
NO_USAGE = "the provider reported no usage: this answer's tokens and cost are unknown"


def usage_absent(u: Any) -> bool:
    """Whether the reply carried no usage at all (not: usage of zeros)."""
    return u is None or (bool(getattr(u, "orch_absent", False))
                         and not getattr(u, "prompt_tokens", 0)
                         and not getattr(u, "completion_tokens", 0))


def usage_of(u: Any, bound: int = MAX_TOKEN_COUNT) -> tuple[Usage, str | None]:
    """The provider's four counts, sanitised: unreadable, fractional or negative counts are
    read as safe ints, counts past ``bound`` are clamped to it, cached input past the input
    and reasoning past the output are clamped to them. Returns the usage and a note saying
    what was wrong (None when the figures were believable): the leg is then ``suspect``."""
    if u is None:
        return Usage(), None
    prompt_details = getattr(u, "prompt_tokens_details", None)
    completion_details = getattr(u, "completion_tokens_details", None)
    raw = {"input_tokens": getattr(u, "prompt_tokens", 0),
           "output_tokens": getattr(u, "completion_tokens", 0),
           "reasoning_tokens": getattr(completion_details, "reasoning_tokens", 0),
           "cached_tokens": getattr(prompt_details, "cached_tokens", 0)}
    fixed = getattr(u, "orch_unreadable", None)  # what litellm could not have read
    problems = [f"{_LITELLM_NAMES.get(k, k)} {p}" for k, p in
                (fixed.items() if isinstance(fixed, dict) else ()) if k in _LITELLM_NAMES]
    counts = {}
    for name, value in raw.items():
        count, problem = read_count(value)
        if count > bound:  # a count read from a string or a float is bounded too
            problem = "; ".join(filter(None, (problem, f"{count:,} is past the bound of {bound:,}")))
            count = bound
        if problem is not None:
            problems.append(f"{name} {problem}")
        counts[name] = count
    for part, whole in (("cached_tokens", "input_tokens"), ("reasoning_tokens", "output_tokens")):
        if counts[part] > counts[whole]:
            problems.append(f"{part} {counts[part]:,} is more than {whole} {counts[whole]:,}")
            counts[part] = counts[whole]
    note = None
    if problems:
        note = (f"suspect usage: {'; '.join(problems)} (clamped to 0..{bound:,}); the cost is "
                "computed from the clamped counts")
    return Usage(**counts), note


def cost_of(model: ResolvedModel, raw: Any, usage: Usage,
            suspect: bool = False) -> tuple[float | None, str]:
    """``priced`` from litellm's price map, ``declared``/``free`` from the provider, else
    ``unknown`` with no number: a cost is never guessed. Usage that had to be clamped
    (``suspect``) is priced from the clamped counts and marked ``suspect``."""
    cost, source = _cost(model, raw, usage, suspect)
    if cost is not None and (not math.isfinite(cost) or cost < 0):
        cost, source = _price_usage(model, usage), "suspect"
    if suspect:
        source = "suspect"
    return cost, source


def litellm_prices(model: ResolvedModel) -> dict[str, float]:
    """Per-token prices for litellm when orch works out the cost itself (:func:`_cost`: the
    provider's declared prices, or ``unknown`` for an endpoint declared by URL), so litellm's
    own calculator never searches its price map for a name it cannot know. The miss formats a
    traceback, cached by an error text naming the model: in a wave of distinct models, ~45% of
    litellm's CPU per call (docs/performance.md).
    litellm's number for these models is never read; an unknown price stays ``unknown``."""
    if not model.declared and (model.input_cost_per_mtok is None
                               or model.output_cost_per_mtok is None):
        return {}  # litellm's price map is the price: its calculator runs
    return {"input_cost_per_token": (model.input_cost_per_mtok or 0.0) / 1_000_000,
            "output_cost_per_token": (model.output_cost_per_mtok or 0.0) / 1_000_000}


def _price_usage(model: ResolvedModel, usage: Usage) -> float | None:
    """The usage at the model's per-token prices (litellm's map), or None when unknown."""
    from orchestrator.models.catalog import model_info

    try:
        info = model_info(model)
    except Exception:
        return None
    if info.input_cost_per_token is None or info.output_cost_per_token is None:
        return None
    return (usage.input_tokens * info.input_cost_per_token
            + usage.output_tokens * info.output_cost_per_token)


def _cost(model: ResolvedModel, raw: Any, usage: Usage,
          suspect: bool) -> tuple[float | None, str]:
    reported = reported_cost(raw)
    if reported is not None and not suspect:  # a gateway's own charge for this answer
        return reported, "reported"
    if model.input_cost_per_mtok is not None and model.output_cost_per_mtok is not None:
        if model.free:
            return 0.0, "free"
        cost = (usage.input_tokens * model.input_cost_per_mtok
                + usage.output_tokens * model.output_cost_per_mtok) / 1_000_000
        return cost, "declared"
    if model.declared:
        return None, "unknown"  # an endpoint we only know by URL: its name may mislead litellm
    if suspect:  # litellm would price the raw, impossible counts
        return _price_usage(model, usage), "priced"
    hidden = getattr(raw, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        try:
            from orchestrator.runtime import litellm

            cost = litellm().completion_cost(completion_response=raw)
        except Exception:
            cost = None
    if cost is None:
        return None, "unknown"
    try:
        return float(cost), "priced"
    except (TypeError, ValueError):
        return None, "unknown"


def endpoint(model: ResolvedModel) -> str:
    """The URL a model's requests go to (its declared base URL, else litellm's default for
    its provider), without any user:password in it; the provider's name when unknown."""
    from urllib.parse import urlsplit, urlunsplit

    url = model.api_base
    if not url:
        try:
            from orchestrator.runtime import litellm

            url = litellm().get_api_base(model.litellm_model, {})
        except Exception:
            url = None
    if not url:
        return f"{model.provider}'s API"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit(parts._replace(netloc=netloc)) if netloc else url
    except ValueError:
        return f"{model.provider}'s API"


def unreachable(error: ProviderError, model: ResolvedModel) -> ProviderError:
    """A connection failure named by where it went and what checks it."""
    if error.reason != "connection":
        return error
    fix = ("`orch local status` shows the server, `orch doctor` checks the set-up"
           if model.provider == "local" else
           "is it up and the base URL right? `orch doctor` checks every endpoint")
    return ProviderError("connection", f"cannot reach {endpoint(model)} ({error.message}); "
                         f"{fix}", error.status, error.retry_after)


# "litellm.InternalServerError: InternalServerError: OpenAIException - boom" -> "boom": the
# reason already names the kind; keep the provider's own words.
_LITELLM_PREFIX = re.compile(r"^(litellm\.\w+:\s*)?(\w+Error:\s*)?(\w+Exception\s*-\s*)?")


def provider_error(exc: BaseException) -> ProviderError:
    """Name a litellm/SDK failure with one of ProviderError.REASONS, keeping its message."""
    from orchestrator.runtime import litellm

    lm = litellm()
    message = scrub(str(getattr(exc, "message", None) or exc) or type(exc).__name__)
    message = message.split("Traceback (most recent call last)")[0]  # litellm appends one
    message = _LITELLM_PREFIX.sub("", " ".join(message.split()))[:500] or type(exc).__name__
    status = getattr(exc, "status_code", None)
    if _BAD_RESPONSE.search(message):  # litellm reports an unreadable 200 as a 500
        return ProviderError("bad_response", f"the reply is not a chat completion ({message})",
                             status)
    refused = _gateway_refusal(exc, message)
    if refused is not None:  # a LiteLLM proxy's own refusal: no wait fixes it (gateway.py)
        return ProviderError(refused[0], refused[1], status)
    limit = _limit(exc, status, message)
    retry_after = limit.retry_after if limit is not None else None
    if limit is not None:  # a 429, 402 or 529: wait and retry, or stop (ratelimit.py)
        return ProviderError(limit.reason, message, status, retry_after)
    if "Connection error" in message and isinstance(exc, lm.InternalServerError):
        # litellm reports a refused or dropped connection as a 500 "Connection error."
        return ProviderError("connection", message, None)
    checks = [
        (lm.ContextWindowExceededError, "context_overflow"),
        (lm.RateLimitError, "rate_limited"),
        ((lm.AuthenticationError, lm.PermissionDeniedError), "auth"),
        (lm.Timeout, "timeout"),  # before APIConnectionError: Timeout subclasses it
        (lm.NotFoundError, "not_found"),
        (lm.BadRequestError, "bad_request"),
        (lm.APIConnectionError, "connection"),
        ((lm.InternalServerError, lm.ServiceUnavailableError, lm.BadGatewayError),
         "server_error"),
    ]
    for classes, reason in checks:
        if isinstance(exc, classes):
            return ProviderError(reason, message, status, retry_after)
    if isinstance(exc, lm.APIError) and status in (401, 403):
        return ProviderError("auth", message, status)
    if isinstance(exc, TimeoutError):
        return ProviderError("timeout", message, status)
    if isinstance(exc, ConnectionError | OSError):
        return ProviderError("connection", message, status)
    if isinstance(status, int):
        if status == 429:
            return ProviderError("rate_limited", message, status, retry_after)
        if status >= 500:
            return ProviderError("server_error", message, status)
        if status in (401, 403):  # litellm raises a plain APIError for 403
            return ProviderError("auth", message, status)
        if status >= 400:
            return ProviderError("bad_request", message, status)
    return ProviderError("server_error", f"{type(exc).__name__}: {message}", status)


_BAD_RESPONSE = re.compile(r"^(Invalid response object|Expecting value|Extra data|"
                           r"Unterminated string|Empty or invalid response|"
                           r"(litellm\.APIError: )?LiteLLM: provider returned a response with "
                           r"no 'choices')")


def _error_body(exc: BaseException) -> Any:
    """The error body the server sent: the HTTP response's text, else litellm's ``exc.body``."""
    response = getattr(exc, "response", None)
    try:
        body = response.text if response is not None else None
    except Exception:
        body = None
    return body or getattr(exc, "body", None)


def _gateway_refusal(exc: BaseException, message: str) -> tuple[str, str] | None:
    from orchestrator.models.proxy import refusal

    try:
        return refusal(_error_body(exc), message)
    except Exception:  # a malformed answer must never hide the failure itself
        return None


def _limit(exc: BaseException, status: int | None, message: str):
    """The provider's own error body and headers, read by ratelimit.classify. litellm
    overwrites ``exc.code``/``exc.type``; the HTTP response keeps what the provider sent."""
    from orchestrator.models.ratelimit import classify

    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        return classify(status, headers, _error_body(exc), message)
    except Exception:  # a malformed answer must never hide the failure itself
        return None
