"""The variables a run declares it reads: its models' keys (every model it may call: the
legs, a chair, a retried wave's models, a council's configured chair), the settings litellm
needs for them, what each loaded plugin declares (``KEY_VARIABLES``), and where its record
goes (:data:`RECORD`: the ledger's URL may hold a password the daemon's own environment
drops). Exactly these are captured when it is prepared and exactly these reach it
(orchestrator/keys.py)."""

from __future__ import annotations

from collections.abc import Iterable

RECORD = ("ORCH_LEDGER_URL", "ORCH_OUTBOX_DIR", "ORCH_USER")
SETTINGS = ("ORCH_OUTBOX_DIR", "ORCH_USER")  # declared, no secret: never registered as one


def settings_among(names) -> frozenset[str]:
    """The declared names that hold no secret: where the record goes, and what untrusted
    programs are given to run (a bench's PATH, locale, HOME)."""
    from orchestrator.sandbox.environment import RUN_VARIABLES

    return frozenset(n for n in names if n in SETTINGS or n in RUN_VARIABLES)


def declared_variables(models: Iterable, pm, extra: Iterable[str] = ()
                       ) -> tuple[frozenset[str], str | None]:
    """(the names, why the run cannot go to another process or None): a model on a litellm
    provider orch has no table for lets litellm read that provider's variables itself, from
    the environment of the process it runs in."""
    from orchestrator.models import key_names
    from orchestrator.plugin_host.plugins import key_variables

    names = {*extra, *RECORD}
    unfit = None
    for model in models:
        names.update(key_names.model_names(model))
        if not (model.declared or model.api_base) and not key_names.tabled(model.provider):
            unfit = unfit or (f"litellm reads the variables of provider {model.provider} "
                              "itself, from this process's environment")
    if pm is not None and hasattr(pm, "infos"):
        names.update(key_variables(pm))
    return frozenset(names), unfit
