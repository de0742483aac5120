"""The embedded local model: ``local/NAME`` is a GGUF served by orch's one managed server.

- ``resolve_model`` claims ``local/NAME`` (no I/O: the names come from config) as a free,
  declared OpenAI-compatible model whose address is not known yet.
- ``wave_start`` makes sure the server is up (starting it if needed, a one-line error if it
  cannot be) and points the wave's local legs at it. The address is filled in here rather than
  at resolve time because only now is a server really needed and its port known: the leg's
  frozen ResolvedModel is swapped for a copy with ``api_base`` set (``dataclasses.replace``).
- ``leg_start`` does the same for a leg that did not exist at wave start (the chair).
- ``before_request`` caps the completion at ``local.max_tokens`` when nothing else set a
  limit: a base model otherwise writes until its context is full.
- While the wave runs a lease keeps the server from stopping for idleness.
"""

from __future__ import annotations

from dataclasses import replace

from orchestrator.errors import OrchError
from orchestrator.hookspecs import hookimpl

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
    from orchestrator.models import ResolvedModel

    models = catalogue(_settings(config).models)
    if name not in models:
        raise OrchError(f"no local model {name!r} (known: {', '.join(sorted(models))}); add a "
                        f"GGUF with `orch local add PATH --alias {name}`")
    return ResolvedModel(name=spec, provider=PROVIDER, litellm_model=f"openai/{name}",
                         input_cost_per_mtok=0.0, output_cost_per_mtok=0.0, declared=True)


async def _ensure(config, need: set[str]):
    import anyio

    from orchestrator.local.manager import ensure

    settings = _settings(config)
    try:
        state, started = await anyio.to_thread.run_sync(lambda: ensure(settings, need))
    except OrchError:
        raise
    except Exception as exc:  # never let a broken start pass as "no change" (isolated)
        raise OrchError(f"the local server could not start: {type(exc).__name__}: {exc}") from None
    return settings, state, started


def _point(leg, settings, state) -> None:
    leg.model = replace(leg.model, api_base=state["url"])
    leg.state[PROVIDER] = {"max_tokens": settings.max_tokens}
    leg.set("local_server", {"url": state["url"], "pid": state["server_pid"]})


@hookimpl(trylast=True)
async def wave_start(wave):
    legs = [leg for leg in wave.legs if _alias(leg.model)]
    if not legs:
        return None
    from orchestrator.local.manager import Lease

    settings, state, started = await _ensure(wave.config, {_alias(leg.model) for leg in legs})
    for leg in legs:
        _point(leg, settings, state)
    wave.state[PROVIDER] = Lease(settings.idle_s)
    if started:
        wave.notice(f"started the local model server (pid {state['server_pid']}, "
                    f"{state['url']}); it stops after "
                    f"{settings.idle_s / 60:g} idle minutes" if settings.idle_s else
                    f"started the local model server (pid {state['server_pid']}, "
                    f"{state['url']}); `orch server stop` stops it")
    return None


@hookimpl(trylast=True)
async def leg_start(leg):
    alias = _alias(leg.model)
    if alias is None or leg.model.api_base:
        return None
    settings, state, _ = await _ensure(leg.config, {alias})
    _point(leg, settings, state)
    return None


@hookimpl(trylast=True)
def before_request(leg, request):
    cap = (leg.state.get(PROVIDER) or {}).get("max_tokens")
    if not cap or not _alias(leg.model):
        return None
    if "max_tokens" in request.params or "max_completion_tokens" in request.params:
        return None
    return request.evolve(params={**request.params, "max_tokens": cap})


@hookimpl(trylast=True)
def wave_end(wave):
    lease = wave.state.pop(PROVIDER, None)
    if lease is not None:
        lease.close()
    return None
