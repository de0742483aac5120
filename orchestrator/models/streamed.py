"""A streamed answer, read to its end: each piece of text handed on as it arrives, then the
whole reply rebuilt as the one response every hook, the repair and the account read.

Every request a leg sends asks for a stream with the usage in it (``stream_options.
include_usage``): the text reaches the user while the model writes, and the ledger still gets
the provider's own counts for that request. litellm's ``stream_chunk_builder`` rebuilds the
reply (text, tool calls, finish reason, usage) from the chunks, so what follows the wire is
the same :class:`~orchestrator.request.Response` a plain answer gave.

Two things the builder does that orch must not: a stream that carried no usage is given
usage counted by a tokenizer, which would reach the ledger as if the provider said it, and
the response headers (a gateway's charged cost, its rate-limit hints) stay on the stream.
Here a stream with no usage chunk rebuilds a reply with no usage (the leg's estimate, marked
as one, as for a plain answer without usage), and the stream's headers are kept on the reply.

A provider may ignore ``"stream": true`` and answer with one plain JSON completion. The
OpenAI SDK's stream reader finds no event in such a body and litellm hands on an empty
stream: the answer, already billed, would be lost. Its ``Content-Type`` says which it is
before a byte is read, so such a body is read whole and converted by litellm's own converter
for a plain answer: the same reply, usage and cost as a leg nobody watched, its text handed
on at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.errors import ProviderError

# what a request asks for: a stream, with the usage of the whole answer in its last chunk
STREAM_KWARGS: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}


def _text_of(chunk: Any) -> str:
    """The new answer text a chunk carries ('' for a role, tool call or usage chunk)."""
    choices = getattr(chunk, "choices", None) or ()
    if not choices:
        return ""
    delta = getattr(choices[0], "delta", None)
    text = getattr(delta, "content", None)
    return text if isinstance(text, str) else ""


def _usage_sent(chunk: Any) -> Any:
    """The usage the provider sent on one of its chunks, or None."""
    try:
        usage = chunk.get("usage") if hasattr(chunk, "get") else getattr(chunk, "usage", None)
    except Exception:
        return None
    return usage


async def read(stream: Any, messages: list[dict[str, Any]],
               on_text: Callable[[str], None] | None = None) -> Any:
    """The whole reply of ``stream`` (litellm's async stream), ``on_text`` called with each
    piece of text in order. The stream is closed however the read ends (a cancelled leg
    leaves no connection open)."""
    from orchestrator.runtime import litellm

    plain = _plain_body(stream)
    if plain is not None:  # no stream at all: one JSON completion, read whole
        try:
            raw = await _read_plain(plain)
        finally:
            await _close(stream)
        text = _answer_text(raw)
        if text and on_text is not None:
            on_text(text)
        return raw
    chunks: list[Any] = []
    try:
        async for chunk in stream:
            chunks.append(chunk)
            text = _text_of(chunk)
            if text and on_text is not None:
                on_text(text)
    finally:
        await _close(stream)
    # litellm's wrapper keeps the provider's own chunks (``chunks``); what it hands on may
    # hold chunks of its own: a finish for a body that was no stream at all, a usage chunk
    # counted by a tokenizer when the provider sent none
    sent = getattr(stream, "chunks", None)
    sent = sent if isinstance(sent, list) else chunks
    if not sent:
        raise ProviderError("bad_response", "the reply carried no streamed chunk (a body that "
                            "is not server-sent events, or an empty stream)")
    raw = litellm().stream_chunk_builder(chunks, messages=messages)
    if raw is None:
        return None  # normalise: "the reply has no choices"
    usages = [u for c in sent if (u := _usage_sent(c)) is not None]
    if not usages:
        raw.usage = None  # not the builder's tokenizer count: the provider said nothing
    else:
        _keep_marks(usages, raw.usage)
    _keep_headers(stream, raw)
    return raw


def _plain_body(stream: Any) -> Any:
    """The HTTP response under ``stream`` when the provider answered with JSON instead of
    server-sent events (it ignored ``"stream": true``), else None. Only the OpenAI-compatible
    client's stream (the SDK's, over httpx) shows its response; another is read as a stream."""
    response = getattr(getattr(stream, "completion_stream", None), "response", None)
    headers = getattr(response, "headers", None)
    if headers is None or not hasattr(response, "aread"):
        return None
    try:
        kind = str(headers.get("content-type") or "").split(";")[0].strip().lower()
    except Exception:
        return None
    return response if kind == "application/json" or kind.endswith("+json") else None


async def _read_plain(response: Any) -> Any:
    """A plain JSON completion as litellm makes one for a request that asked for no stream
    (its OpenAI-compatible converter, with orch's corrections: litellm_patch.py), the
    response headers kept where a plain reply has them (a gateway's cost, models/proxy.py)."""
    import json

    from orchestrator.runtime import litellm

    body = await response.aread()
    try:
        doc = json.loads(body)
    except ValueError:
        raise ProviderError("bad_response", f"the reply is neither server-sent events nor "
                            f"JSON ({body[:60]!r})") from None
    if not isinstance(doc, dict):
        raise ProviderError("bad_response", f"the reply is JSON but no completion "
                            f"({doc!r:.60})")
    from litellm.llms.openai import openai as handler

    headers = dict(response.headers)
    return handler.convert_to_model_response_object(
        response_object=doc, model_response_object=litellm().ModelResponse(),
        hidden_params={"headers": headers, "additional_headers": {
            f"llm_provider-{k}": v for k, v in headers.items()}},
        _response_headers=headers)


def _answer_text(raw: Any) -> str:
    """The text of a whole reply's first choice ('' when it has none)."""
    choices = getattr(raw, "choices", None) or ()
    message = getattr(choices[0], "message", None) if choices else None
    text = getattr(message, "content", None)
    return text if isinstance(text, str) else ""


def _keep_marks(usages: list[Any], usage: Any) -> None:
    """What ``litellm_patch.honest_usage`` found wrong in the provider's usage (a count that
    was no number), kept on the rebuilt usage: the answer stays ``suspect``."""
    marks: dict[str, Any] = {}
    for sent in usages:
        marks.update(getattr(sent, "orch_unreadable", None) or {})
    absent = all(getattr(sent, "orch_absent", False) for sent in usages)
    try:
        if marks:
            usage.orch_unreadable = marks
        # the builder's own Usage may look absent (built from zeros): the provider's decides
        usage.orch_absent = absent
    except Exception:
        pass


async def _close(stream: Any) -> None:
    """The stream's connection released (litellm's wrapper, or the SDK stream under it)."""
    for target in (stream, getattr(stream, "completion_stream", None)):
        close = getattr(target, "aclose", None) or getattr(target, "close", None)
        if close is None:
            continue
        try:
            result = close()
            if hasattr(result, "__await__"):
                await result
            return
        except Exception:
            continue


def _keep_headers(stream: Any, raw: Any) -> None:
    """The stream's response headers on the rebuilt reply, where a plain reply has them
    (``models/proxy.py`` reads a gateway's cost there)."""
    hidden = getattr(stream, "_hidden_params", None)
    if isinstance(hidden, dict):
        mine = getattr(raw, "_hidden_params", None)
        if not isinstance(mine, dict):
            mine = {}
        for key in ("headers", "additional_headers"):
            if hidden.get(key) is not None:
                mine[key] = hidden[key]
        try:
            raw._hidden_params = mine
        except Exception:
            pass
    headers = getattr(stream, "_response_headers", None)
    if headers is not None:
        try:
            raw._response_headers = headers
        except Exception:
            pass
