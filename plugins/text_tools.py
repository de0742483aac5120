"""Lift tool calls a model wrote as text into real tool calls.

Models without native tool calling — and small models on the ``minimal`` tier — often write a
call into their answer instead: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, a
fenced JSON block, or a bare JSON object. When the object names a tool in the leg's roster and
carries its arguments it becomes a real call; any other JSON (a code sample, an answer about
JSON) stays text. Lifted arguments are mended by the json_repair plugin, which wraps the
``after_response`` pipeline and so sees every call it ends with.

Lifting applies when ``plugin_config.text_tools.lift`` is ``always``, or (``auto``, the default)
when the leg is on the minimal tier or the model has no native tool calling — litellm says so,
the provider's ``supports_tools: false`` in config, or the endpoint once answered 400 "does
not support tools" (recorded in the catalog; that leg's step is rebuilt once).

**The text protocol.** A model with no native tool calling is never sent ``tools``: the
request goes out with ``tool_format="text"``, the tools and the ``<tool_call>{"name": ...,
"arguments": ...}</tool_call>`` format are described at the end of the system prompt, earlier
calls are written back into the assistant's text in that format, and tool results come back
as a user message. The calls it writes are lifted as above.

**Models with no system role.** A base model (the embedded 270M model's plain template) is
sent no system message, so the protocol would never reach it. With
``plugin_config.text_tools.placement`` ``user`` - or ``auto`` (the default) when the leg runs
on such a template (the local plugin's ``plain`` state) - the protocol opens the first user
message instead, and ends with one worked call: a small base model copies an example better
than it follows a description.
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.hookspecs import hookimpl

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"```[ \t]*(json5?|jsonc|tool_call|tool|)[ \t]*\n(.*?)```", re.S | re.I)
_ANY_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_OPEN = re.compile(r"[{\[]")
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_MODES = ("auto", "always", "never")
_PLACEMENTS = ("auto", "system", "user")
_MAX_SCAN = 200_000  # characters of text searched for bare JSON objects


def lift(text: str, roster: Any) -> tuple[list[tuple[str, str]], str]:
    """The calls written in ``text`` as ``(tool name, arguments JSON)``, and the text left.

    Tags win over fences, fences over bare objects: a model that writes one form does not mix
    in another, and what it shows in a lesser form is more likely an example."""
    for pattern, group in ((_TAG, 1), (_FENCE, 2)):
        calls, spans = [], []
        for match in pattern.finditer(text):
            found = _calls_in(match[group], roster, tagged=pattern is _TAG)
            if found:
                calls += found
                spans.append(match.span())
        if calls:
            return calls, _without(text, spans)
    return _bare(text, roster)


def _calls_in(fragment: str, roster: Any, *, tagged: bool) -> list[tuple[str, str]]:
    try:
        value = json.loads(fragment)
    except ValueError:
        value = _repair(fragment)
    return _calls_from(value, roster, tagged=tagged)


def _calls_from(value: Any, roster: Any, *, tagged: bool) -> list[tuple[str, str]]:
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, roster, tagged=tagged) for item in items]
    if not calls or any(c is None for c in calls):
        return []  # a list that is not all calls is data, not calls
    return calls


def _repair(fragment: str) -> Any:
    try:
        import json_repair

        return json_repair.loads(fragment)
    except Exception:
        return None


def _as_call(obj: Any, roster: Any, *, tagged: bool) -> tuple[str, str] | None:
    """``(name, arguments)`` when ``obj`` names a roster tool and (outside tags) its arguments."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # the OpenAI shape, written out
        obj = obj["function"]
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None or name not in roster:
        return None
    key = next((k for k in _ARG_KEYS if k in obj), None)
    if key is None:
        if not tagged:
            return None
        arguments: Any = {}
    else:
        arguments = obj[key]
    if isinstance(arguments, str):
        return name, arguments  # JSON in a string: json_repair mends it if need be
    if isinstance(arguments, dict):
        return name, json.dumps(arguments, ensure_ascii=False)
    return None


def _bare(text: str, roster: Any) -> tuple[list[tuple[str, str]], str]:
    calls, spans = [], []
    if len(text) <= _MAX_SCAN:
        # Code blocks and tags were judged above: what they hold is not a bare object.
        seen = _ANY_FENCE.sub(lambda m: " " * len(m[0]), _TAG.sub(
            lambda m: " " * len(m[0]), text))
        decoder = json.JSONDecoder()
        match = _OPEN.search(seen)
        while match:
            try:
                value, end = decoder.raw_decode(seen, match.start())
            except ValueError:
                match = _OPEN.search(seen, match.start() + 1)
                continue
            found = _calls_from(value, roster, tagged=False)
            if found:
                calls += found
                spans.append((match.start(), end))
            match = _OPEN.search(seen, end)  # what a value holds is its data
    stripped = text.strip()
    if not calls and stripped.startswith("{"):  # the whole answer is one broken object
        call = _as_call(_repair(stripped), roster, tagged=False)
        if call:
            return [call], ""
    return calls, _without(text, spans)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    parts, last = [], 0
    for start, end in spans:
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    return re.sub(r"\n{3,}", "\n\n", "".join(parts)).strip()


def _mode(leg) -> str:
    mode = leg.plugin_config("text_tools").get("lift", "auto")
    if mode not in _MODES:
        from orchestrator.errors import OrchError

        raise OrchError(f"plugin_config.text_tools.lift is {mode!r}; set it to one of "
                        f"{', '.join(_MODES)} in config.json")
    return mode


def _lifting(leg) -> str | None:
    """Why this leg's text is searched for calls (recorded), or None."""
    state = leg.state.setdefault("text_tools", {"lifted": 0})
    if "why" not in state:
        mode = _mode(leg)
        why = {"always": "config", "never": None}.get(mode)
        if mode == "auto":
            if leg.tier == "minimal":
                why = "minimal tier"
            elif _text_mode(leg):
                why = "no native tool calling"
        state["why"] = why
    return state["why"]


def _native_tools(leg) -> bool | None:
    from orchestrator.models.catalog import model_info

    model = leg.model
    declared = leg.config.providers.get(model.provider) if model.declared else None
    return model_info(model, declared).supports_tools


TEXT_PROTOCOL_HEAD = "## Tools (written as text)"
TEXT_PROTOCOL = TEXT_PROTOCOL_HEAD + """

You can use the tools below. Call one by writing, on its own line, exactly:
<tool_call>{"name": "TOOL_NAME", "arguments": {"PARAMETER": "VALUE"}}</tool_call>
The result comes back in the next user message. Call tools only to gather what the task \
needs; then stop calling them and give your answer in the form the task asks for.

Tools:
"""


def example_call(tools: list[dict[str, Any]]) -> str:
    """One worked call on the first tool, with its required arguments filled in."""
    fn = tools[0].get("function", tools[0])
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    args = {name: (1 if (props.get(name) or {}).get("type") == "integer" else "README.md")
            for name in params.get("required") or []}
    return ("\n\nFor example, to call " + str(fn.get("name")) + ":\n<tool_call>"
            + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>")


def describe_tools(tools: list[dict[str, Any]]) -> str:
    """The protocol and one line per tool: name, description, JSON schema of its arguments."""
    lines = []
    for schema in tools:
        fn = schema.get("function", schema)
        params = json.dumps(fn.get("parameters") or {}, ensure_ascii=False,
                            separators=(",", ":"))
        lines.append(f"- {fn.get('name')}: {' '.join(str(fn.get('description') or '').split())}"
                     f" Arguments: {params}")
    return TEXT_PROTOCOL + "\n".join(lines)


def as_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
            placement: str = "system", example: bool = False) -> list[dict[str, Any]]:
    """``messages`` for an endpoint without tool calling: the protocol in the system prompt
    (once; or opening the first user message, ``placement="user"``), assistant calls as
    ``<tool_call>`` text, tool results as one user message."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    protocol = describe_tools(tools) + (example_call(tools) if example and tools else "")
    if placement == "user":
        first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if first is not None and TEXT_PROTOCOL_HEAD not in str(messages[first].get("content")):
            messages = [*messages[:first], {**messages[first], "content": protocol + "\n\n"
                                            + str(messages[first].get("content") or "")},
                        *messages[first + 1:]]
        protocol = None
    if protocol is not None and (not messages or messages[0].get("role") != "system"):
        messages = [{"role": "system", "content": ""}, *messages]
    for m in messages:
        role = m.get("role")
        if role == "system" and not out and protocol is not None:
            content = str(m.get("content") or "")
            if TEXT_PROTOCOL_HEAD not in content:
                content = (content.rstrip() + "\n\n" if content.strip() else "") + protocol
            out.append({**m, "content": content})
        elif role == "assistant" and m.get("tool_calls"):
            written = []
            for call in m["tool_calls"]:
                fn = call.get("function") or {}
                names[call.get("id", "")] = fn.get("name", "")
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = fn.get("arguments")
                written.append("<tool_call>" + json.dumps(
                    {"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
                    + "</tool_call>")
            text = "\n".join([*([m["content"]] if m.get("content") else []), *written])
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            result = (f"Result of {names.get(m.get('tool_call_id', ''), 'the tool')} "
                      f"({m.get('tool_call_id', '')}):\n{m.get('content') or ''}")
            if out and out[-1].get("role") == "user" and out[-1].get("_results"):
                out[-1]["content"] += "\n\n" + result
            else:
                out.append({"role": "user", "content": result, "_results": True})
        else:
            out.append(m)
    return [{k: v for k, v in m.items() if k != "_results"} for m in out]


def _text_mode(leg) -> bool:
    state = leg.state.setdefault("text_tools", {"lifted": 0})
    if leg.record.extra.get("tools_rejected"):  # this leg's endpoint said so: text, whatever
        state["native"] = False                 # the catalog could record
    elif "native" not in state:
        state["native"] = _native_tools(leg) is not False
    return not state["native"]


@hookimpl(trylast=True)
def before_request(leg, request):
    """No native tool calling: describe the tools in the prompt instead of sending them."""
    if not request.tools or request.tool_format != "native" or not _text_mode(leg):
        return None
    if leg.record.extra.get("tool_format") != "text":
        leg.set("tool_format", "text")
    placement = _placement(leg)
    return request.evolve(messages=as_text(request.messages, request.tools,
                                           placement=placement,
                                           example=placement == "user"),
                          tool_format="text")


def _placement(leg) -> str:
    """Where the protocol goes: the system prompt, or the first user message for a model
    with no system role."""
    placement = leg.plugin_config("text_tools").get("placement", "auto")
    if placement not in _PLACEMENTS:
        from orchestrator.errors import OrchError

        raise OrchError(f"plugin_config.text_tools.placement is {placement!r}; set it to one "
                        f"of {', '.join(_PLACEMENTS)} in config.json")
    if placement == "auto":
        plain = (leg.state.get("local") or {}).get("plain")  # the local plugin's base model
        return "user" if plain else "system"
    return placement


@hookimpl(trylast=True)
def leg_start(leg):
    _mode(leg)  # a bad setting ends the leg before anything is spent
    _placement(leg)


@hookimpl(trylast=True)
def after_response(leg, request, response):
    if response.tool_calls or not request.tools or not leg.tools or not response.text:
        return None  # native calls, or no tools offered: nothing to lift
    why = _lifting(leg)
    if why is None:
        return None
    calls, rest = lift(response.text, leg.tools)
    if not calls:
        return None
    from orchestrator.request import ToolCall

    state = leg.state["text_tools"]
    lifted = tuple(ToolCall(id=f"call_text_{leg.step}_{i}", name=name, arguments=arguments)
                   for i, (name, arguments) in enumerate(calls))
    state["lifted"] += len(lifted)
    leg.set("text_tool_calls", {"lifted": state["lifted"], "why": why})
    return response.evolve(tool_calls=lifted, text=rest)
