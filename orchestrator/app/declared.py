"""The variables a run declares it reads: its models' keys (every model it may call: the
legs, a chair, a retried wave's models, a council's configured chair), the settings litellm
needs for them, and what each loaded plugin declares (``KEY_VARIABLES``). Exactly these are
captured when it is prepared and exactly these reach it (orchestrator/keys.py)."""

from __future__ import annotations

from collections.abc import Iterable


def declared_variables(models: Iterable, pm, extra: Iterable[str] = ()
                       ) -> tuple[frozenset[str], str | None]:
    """(the names, why the run cannot go to another process or None): a model on a litellm
    provider orch has no table for lets litellm read that provider's variables itself, from
    the environment of the process it runs in."""
    from orchestrator.models import key_names
    from orchestrator.plugin_host.plugins import key_variables

    names = set(extra)
    unfit = None
    for model in models:
        names.update(key_names.model_names(model))
        if not (model.declared or model.api_base) and not key_names.tabled(model.provider):
            unfit = unfit or (f"litellm reads the variables of provider {model.provider} "
                              "itself, from this process's environment")
    if pm is not None and hasattr(pm, "infos"):
        names.update(key_variables(pm))
    return frozenset(names), unfit
