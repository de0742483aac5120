"""The embedded local model: ``local/NAME`` is a GGUF served by orch's one managed server.

- ``resolve_model`` claims ``local/NAME`` (no I/O: the names come from config) as a free,
  declared OpenAI-compatible model whose address is not known yet.
- ``wave_start`` makes sure the server is up (starting it if needed, a one-line error if it
  cannot be) and points the wave's local legs at it. The address is filled in here rather than
  at resolve time because only now is a server really needed and its port known: the leg's
  frozen ResolvedModel is swapped for a copy with ``api_base`` set (``dataclasses.replace``).
- ``leg_start`` does the same for a leg that did not exist at wave start (the chair).
- ``wave_start`` asks for as many parallel slots as the wave has local legs (up to
  ``local.max_slots``): llama-server decodes them together.
- ``before_request`` caps the completion at ``local.max_tokens`` when nothing else set a
  limit (a base model otherwise writes until its context is full), sends the ``orch-plain``
  stop string and leaves system messages out for such a model, refuses (``LOCAL_CONTEXT``,
  naming ``local.n_ctx``) a prompt longer than a slot's context, and never sends ``tools``:
  the embedded model has no native tool calling
  (``supports_tools=False`` in the catalog, so the text tool protocol applies); a wrapper
  (``withhold_native_tools``) sees the request every plugin made and withholds tools still
  native there, and the leg records ``tools_withheld``.
- ``tool_roster``: a base model is offered the workspace tools only when the run asked for
  them (``--tools read``); fanout's default leaves them out (``tools_withheld``, with why).
- ``default_models``: the local model is the default when nothing else is set up. This
  plugin alone makes that choice; disabled, fanout asks the user to choose.
- While the wave runs a lease keeps the server from stopping for idleness.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.errors import OrchError, Refusal, UsageProblem
from orchestrator.hookspecs import hookimpl
from orchestrator.local.llama_server import PLAIN, plain_stop

PROVIDER = "local"


def _settings(config):
    from orchestrator.local.settings import LocalSettings

    return LocalSettings.from_config(config)


def _alias(model) -> str | None:
    """The served alias of a local model, None for any other model."""
    if model.provider != PROVIDER or not model.litellm_model.startswith("openai/"):
        return None
    return model.litellm_model.removeprefix("openai/")


@hookimpl(trylast=True)
def resolve_model(spec, config):
    provider, _, name = spec.partition("/")
    if provider != PROVIDER:
        return None
    from orchestrator.local.model import catalogue
    from orchestrator.models.addressing import ResolvedModel

    models = catalogue(_settings(config).models)
    if name not in models:
        raise UsageProblem(f"no local model {name!r} (known: {', '.join(sorted(models))}); add a "
                        f"GGUF with `orch local add PATH --alias {name}`")
    return ResolvedModel(name=spec, provider=PROVIDER, litellm_model=f"openai/{name}",
                         input_cost_per_mtok=0.0, output_cost_per_mtok=0.0, declared=True,
                         supports_tools=False,
                         context_window=_settings(config).n_ctx)  # per slot: the guards' window


@hookimpl(trylast=True)
def default_models(config):
    from orchestrator.local.default import NOTICE, default_models

    models = default_models(config)
    return {"models": models, "notice": NOTICE} if models else None


START_WAIT_S = 3600.0  # the manager bounds a start itself; this only keeps signals live


async def _ensure(config, need: set[str], slots: int = 1):
    from orchestrator import tool_thread
    from orchestrator.local.manager import ensure

    settings = _settings(config)
    try:
        # a daemon thread: a signal while the server starts ends the wave at once; the thread
        # then stops a start it began and lets go of the server lock (tool_thread.expired:
        # in orch serve it outlives the job, and the next job must not wait for it)
        state, started = await tool_thread.run_sync(
            lambda: ensure(settings, need, slots=slots, abandoned=tool_thread.expired),
            seconds=START_WAIT_S)
    except OrchError:
        raise
    except Exception as exc:  # never let a broken start pass as "no change" (isolated)
        raise OrchError(f"the local server could not start: {type(exc).__name__}: {exc}") from None
    return settings, state, started


def _point(leg, settings, state) -> None:
    from orchestrator.local.model import catalogue

    model = catalogue(settings.models).get(_alias(leg.model))
    plain = model is not None and model.chat_format == PLAIN
    # The slot of the server that runs (started with the n_ctx of its day: a changed
    # `local.n_ctx` applies at the next start) is the window both guards check.
    n_ctx = state.get("n_ctx_per_slot") or settings.n_ctx
    leg.model = replace(leg.model, api_base=state["url"], context_window=n_ctx)
    leg.state[PROVIDER] = {"max_tokens": settings.max_tokens, "plain": plain, "n_ctx": n_ctx,
                           "base": f"http://{state['host']}:{state['port']}"}
    leg.set("local_server", {"url": state["url"], "pid": state["server_pid"],
                             "path": state.get("path"), "slots": state.get("slots")})


@hookimpl(trylast=True)
async def wave_start(wave):
    legs = [leg for leg in wave.legs if _alias(leg.model)]
    if not legs:
        return None
    from orchestrator.local.manager import Lease

    settings, state, started = await _ensure(wave.config, {_alias(leg.model) for leg in legs},
                                             slots=len(legs))
    for leg in legs:
        _point(leg, settings, state)
    for text in state.get("notices") or []:
        wave.notice(text)
    wave.state[PROVIDER] = Lease(settings.idle_s)
    if started:
        took = f" in {state['start_s']:g} s" if state.get("start_s") is not None else ""
        wave.notice(f"started the local model server{took} (pid {state['server_pid']}, "
                    f"{state['url']}); it stops after "
                    f"{settings.idle_s / 60:g} idle minutes" if settings.idle_s else
                    f"started the local model server{took} (pid {state['server_pid']}, "
                    f"{state['url']}); `orch local stop` stops it")
    return None


@hookimpl(trylast=True)
async def leg_start(leg):
    alias = _alias(leg.model)
    if alias is None or leg.model.api_base:
        return None
    settings, state, _ = await _ensure(leg.config, {alias})
    _point(leg, settings, state)
    return None


BASE_MODEL_TOOLS = ("a base model is offered tools only when they are asked for "
                    "(--tools read): unasked, the protocol would be most of its prompt")


@hookimpl(trylast=True)
def tool_roster(leg, tools):
    """A base model (the plain format) gets tools only when the run asked for them: the text
    protocol and its worked call would be most of a 270M model's prompt, and it copies the
    example rather than answering. ``tools_asked`` False is fanout's default ``--tools``."""
    mine = leg.state.get(PROVIDER)
    if (not tools or mine is None or not mine.get("plain")
            or leg.options.get("tools_asked", True)):
        return None
    leg.set("tools_withheld", sorted(t.name for t in tools))
    leg.set("tools_withheld_why", BASE_MODEL_TOOLS)
    return []


@hookimpl(trylast=True)
def before_request(leg, request):
    mine = leg.state.get(PROVIDER)
    if mine is None or not _alias(leg.model):
        return None
    params = dict(request.params)
    cap = mine.get("max_tokens")
    if cap and "max_tokens" not in params and "max_completion_tokens" not in params:
        params["max_tokens"] = cap
    changes = {}
    if mine.get("plain"):
        # A base model continues text: system messages are left out (llama.cpp would fold
        # them into the first user message, since the plain template has no system role).
        kept = [m for m in request.messages if m.get("role") != "system"]
        if len(kept) != len(request.messages):
            changes["messages"] = kept
        # Only an opening prompt is continued inline ("The three primary colours are"): a
        # later step's last message is a tool result or a note, after which the model starts
        # a fresh paragraph - the inline stop would take its first blank line for the end.
        last = kept[-1].get("content") if len(kept) == 1 else ""
        params.setdefault("stop", plain_stop(last if isinstance(last, str) else ""))
        _check_context(mine, changes.get("messages", request.messages))
    if params != request.params:
        changes["params"] = params
    return request.evolve(**changes) if changes else None


@hookimpl(specname="before_request", wrapper=True, trylast=True)
def withhold_native_tools(leg, request):
    """A wrapper, so it sees the request every other plugin made: native ``tools`` never go
    on the wire (the model has no native tool calling). In the text protocol (text_tools)
    the tools are described in the prompt and stay on the request so the calls the model
    writes are lifted; only tools still native at the end are withheld, and recorded. A
    plain hook here ran before text_tools (built-ins of one order run by name) and took the
    tools away before the protocol could describe them."""
    final = yield
    if (final is None or not final.tools or final.tool_format != "native"
            or leg.state.get(PROVIDER) is None or not _alias(leg.model)):
        return final
    leg.set("tools_withheld", sorted(t.get("function", {}).get("name", "?")
                                     for t in final.tools))
    return final.evolve(tools=None)


def _check_context(mine: dict, messages: list[dict]) -> None:
    """Refuse, naming ``local.n_ctx``, a prompt longer than a slot's context: counted by the
    server's own tokenizer (``POST /tokenize``) on the text the plain template makes. A
    server that cannot count (a stand-in) is left to answer for itself."""
    n_ctx = mine.get("n_ctx")
    text = "\n\n".join(m["content"].strip() for m in messages
                        if isinstance(m.get("content"), str) and m["content"].strip())
    if not n_ctx or len(text) + 2 < n_ctx:  # a token is a character or more (+ BOS)
        return
    tokens = _count_tokens(mine["base"], text)
    if tokens is not None and tokens >= n_ctx:
        raise Refusal("LOCAL_CONTEXT",
                      f"the prompt is {tokens} tokens and a slot of the local server holds "
                      f"{n_ctx} (`local.n_ctx`): raise `local.n_ctx` in config.json (the "
                      "next server start uses it: `orch local stop`), or send less context")


def _count_tokens(base: str, text: str) -> int | None:
    import json
    import urllib.request

    from orchestrator.local.state import NO_PROXY

    body = json.dumps({"content": text, "add_special": True}).encode()
    request = urllib.request.Request(f"{base}/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with NO_PROXY.open(request, timeout=10) as resp:
            tokens = json.load(resp).get("tokens")
    except (OSError, ValueError, AttributeError):
        return None
    return len(tokens) if isinstance(tokens, list) else None


@hookimpl(trylast=True)
def wave_end(wave):
    lease = wave.state.pop(PROVIDER, None)
    if lease is not None:
        lease.close()
    return None
