"""Model addressing: ``alias`` → ``PROVIDER/MODEL[@VARIANT]`` → what litellm is called with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.config import Config
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.models.names import check_model_name, reserved
from orchestrator.security.secrets import (
    register_identifier,
    register_params,
    register_url,
)

# Sampling variants every install has; config `variants` adds or overrides.
BUILTIN_VARIANTS: dict[str, dict[str, Any]] = {
    "hot": {"temperature": 1.0, "top_p": 0.95},
    "cold": {"temperature": 0.2},
    "greedy": {"temperature": 0.0},
}


@dataclass(frozen=True)
class ResolvedModel:
    """Everything needed to call one model. Holds the *name* of the key variable, never the key."""

    name: str  # canonical name shown to users and written to records, e.g. "myvllm/qwen3-8b@hot"
    provider: str  # "myvllm", "openai", "anthropic", "local", ...
    litellm_model: str  # what litellm is asked for, e.g. "openai/qwen3-8b"
    api_base: str | None = None
    api_key_env: str | None = None
    input_cost_per_mtok: float | None = None
    output_cost_per_mtok: float | None = None
    max_output_tokens: int | None = None
    variant: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    declared: bool = False  # True when the endpoint comes from `orch provider add`
    supports_tools: bool | None = None  # what the resolver knows (a plugin's model); None: ask
    context_window: int | None = None  # what the resolver knows (the local plugin's n_ctx)

    def __post_init__(self) -> None:
        # Names orch itself uses: a key-shape scrubber must never cut them (secrets.py).
        for text in (self.name, self.base_name, self.provider, self.litellm_model,
                     self.litellm_model.partition("/")[2]):
            register_identifier(text)
        register_url(self.api_base)  # a hand-edited URL's credentials are secrets
        register_params(self.sampling)  # a variant's extra_headers, before any file shows it

    @property
    def base_name(self) -> str:
        return self.name.split("@", 1)[0]

    def api_key(self) -> str | None:
        """The key, read to be sent (from the run's variables: orchestrator.keys),
        registered as a secret the moment it is read."""
        if self.api_key_env:
            from orchestrator import keys

            return keys.read(self.api_key_env)
        return None

    @property
    def free(self) -> bool:
        return self.input_cost_per_mtok == 0 and self.output_cost_per_mtok == 0


def split_variant(spec: str) -> tuple[str, str | None]:
    base, sep, variant = spec.partition("@")
    return base, (variant if sep else None)


def resolve(spec: str, config: Config, _seen: tuple[str, ...] = (),
            plugin_resolver=None) -> ResolvedModel:
    """Turn what the user typed into a :class:`ResolvedModel`, or raise a one-line OrchError.

    Aliases expand first; then ``plugin_resolver(base, config)`` (the ``resolve_model`` hook)
    may claim the name (``local/...``); then declared providers; then litellm's own names."""
    spec = spec.strip()
    if not spec:
        raise UsageProblem("empty model name; pass models as --models a,b,c")
    check_model_name(spec)  # a newline or an escape in a name would forge an output line
    base, variant = split_variant(spec)
    if base in config.aliases:
        if base in _seen:
            raise OrchError(f"alias loop: {' -> '.join((*_seen, base))}; fix it with `orch alias set`")
        target = config.aliases[base]
        resolved = resolve(target, config, (*_seen, base), plugin_resolver)
        if variant:
            resolved = _with_variant(resolved, variant, config)
        return resolved
    provider, sep, model = base.partition("/")
    if not sep or not model or not provider:
        raise UsageProblem(
            f"model {spec!r} has no provider; write PROVIDER/MODEL (e.g. openai/gpt-4o-mini) "
            "or define an alias with `orch alias set`"
        )
    claimed = plugin_resolver(base, config) if plugin_resolver else None
    declared = config.providers.get(provider)
    if declared is not None and claimed is None and reserved(provider):
        # config.json read without its checks (doctor): never reroute a reserved id
        raise OrchError(f"model {spec}: config.json declares a provider {provider!r}, "
                        f"which is reserved ({reserved(provider)}); remove it (orch provider "
                        f"remove {provider}) or rename it")
    if claimed is not None:
        resolved = claimed
    elif declared is not None:
        resolved = ResolvedModel(
            name=base,
            provider=provider,
            litellm_model=f"openai/{model}",
            api_base=declared.get("base_url"),
            api_key_env=declared.get("api_key_env"),
            input_cost_per_mtok=declared.get("input_cost_per_mtok"),
            output_cost_per_mtok=declared.get("output_cost_per_mtok"),
            max_output_tokens=declared.get("max_output_tokens"),
            declared=True,
        )
    else:
        resolved = ResolvedModel(name=base, provider=provider, litellm_model=base)
    return _with_variant(resolved, variant, config) if variant else resolved


def _with_variant(model: ResolvedModel, variant: str, config: Config) -> ResolvedModel:
    settings = config.variants.get(variant, BUILTIN_VARIANTS.get(variant))
    if settings is None:
        known = sorted({*BUILTIN_VARIANTS, *config.variants})
        raise UsageProblem(
            f"unknown variant @{variant} on {model.name}; known: {', '.join(known)} "
            "(add one under `variants` in config.json)"
        )
    from dataclasses import replace

    return replace(model, name=f"{model.base_name}@{variant}", variant=variant,
                   sampling=dict(settings))


def parse_model_list(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


def check_key(model: ResolvedModel) -> None:
    """The model's key is set (declared providers: their api_key_env; litellm's: what its
    validate_environment requires, from orch's table of litellm's names, models/key_names.py,
    so no litellm import is paid here). Only names are read, never values; in a run, the
    run's declared variables (orchestrator.keys)."""
    from orchestrator import keys
    from orchestrator.models import key_names

    if model.declared or model.api_base:
        if model.api_key_env and not model.api_key():
            raise OrchError(f"model {model.name} needs ${model.api_key_env}, which is not set; "
                            "export it (or `orch provider add` without --api-key-env)")
        return
    if not key_names.known_to_litellm(model.provider):
        raise UsageProblem(f"model {model.name}: litellm does not know the provider "
                        f"{model.provider!r}; declare it with `orch provider add "
                        f"{model.provider} --base-url URL` or fix the name")
    if key_names.tabled(model.provider):
        missing = key_names.missing(model.provider, keys.view())
    else:  # a provider orch has no table for: litellm's own check (its import is paid)
        from orchestrator.runtime import litellm

        missing = litellm().validate_environment(model=model.litellm_model).get(
            "missing_keys") or []
    register_litellm_keys(model)
    if missing:
        raise OrchError(f"model {model.name} needs {', '.join(missing)} in the environment; "
                        "export it or pick another model")


def register_litellm_keys(model: ResolvedModel) -> None:
    """Register the values of the variables litellm reads for this model's provider (it
    sends them): orch's table of litellm's names (models/key_names.py)."""
    from orchestrator import keys
    from orchestrator.models import key_names

    if model.declared or model.api_base:
        return
    for name in key_names.model_names(model):
        if not name.endswith(("_BASE", "_VERSION", "_REGION", "_REGION_NAME", "_URL",
                              "_PROJECT", "_LOCATION")):
            keys.read(name)


def _names_litellm_checks(litellm_model: str) -> tuple[str, ...]:
    """Every variable ``validate_environment`` checks for ``litellm_model``: it is run, once,
    as a copy whose ``os`` shows an empty environment, so all of them come back missing.

    The copy has its own globals: the process's ``os.environ`` is never swapped, so threads
    that read it meanwhile (concurrent jobs in ``orch serve``, litellm sending a key) see it
    whole, and no key value is read."""
    import types

    from orchestrator.runtime import litellm

    real = litellm().validate_environment
    scope = dict(real.__globals__, os=types.SimpleNamespace(environ={}))
    probe = types.FunctionType(real.__code__, scope, real.__name__, real.__defaults__,
                               real.__closure__)
    probe.__kwdefaults__ = real.__kwdefaults__
    return tuple(probe(model=litellm_model).get("missing_keys") or ())
