"""How long a third party's code may take: each hook, a plugin's own ``HOOK_DEADLINE_S``, its
import. The user's settings are checked here; a value that is not a number of seconds above
0 stops the command in one line naming where it was set."""

from __future__ import annotations

import math
import os
from typing import Any

from orchestrator.errors import OrchError

DEADLINE_S = 5.0  # a third party's hook, unless plugins.hook_deadline_s or the plugin says
WAVE_DEADLINE_S = 30.0  # wave_start / wave_end start servers, open connections
DEADLINE_ENV = "ORCH_HOOK_DEADLINE_S"
IMPORT_DEADLINE_S = 10.0  # a third party's import (and its registration)
IMPORT_ENV = "ORCH_IMPORT_DEADLINE_S"
SLOW_IMPORT_S = 2.0  # an import slower than this is named on stderr: every command pays it


def _seconds(raw: Any) -> float | None:
    """``raw`` as seconds above 0, or None."""
    if isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def hook_deadline_s(config=None) -> float | None:
    """Seconds a third party's hook may take, as the user set it: ``ORCH_HOOK_DEADLINE_S``,
    then config ``plugins.hook_deadline_s``; None when unset (each hook's default then:
    DEADLINE_S, WAVE_DEADLINE_S for wave_start and wave_end)."""
    raw: Any = os.environ.get(DEADLINE_ENV)
    where = DEADLINE_ENV
    if raw is None and config is not None:
        raw = (config.section("plugins") or {}).get("hook_deadline_s")
        where = "plugins.hook_deadline_s in config.json"
    if raw is None or raw == "":
        return None
    value = _seconds(raw)
    if value is None:
        raise OrchError(f"{where} must be a number of seconds above 0 (got {raw!r}); "
                        f"fix it or unset it for the default {DEADLINE_S:g} s")
    return value


def import_deadline_s() -> float:
    """Seconds a third party's import may take (``ORCH_IMPORT_DEADLINE_S``, else 10)."""
    raw = os.environ.get(IMPORT_ENV)
    if raw is None or raw == "":
        return IMPORT_DEADLINE_S
    value = _seconds(raw)
    if value is None:
        raise OrchError(f"{IMPORT_ENV} must be a number of seconds above 0 (got {raw!r}); "
                        f"fix it or unset it for the default {IMPORT_DEADLINE_S:g} s")
    return value


def declared_deadline(raw: Any, plugin: str) -> tuple[float | None, str | None]:
    """A plugin's ``HOOK_DEADLINE_S``: (seconds or None when it declares none, what is wrong
    with it). A wrong one stops a run in one line naming the plugin (declared.check)."""
    if raw is None:
        return None, None
    value = _seconds(raw)
    if value is None:
        return None, (f"plugin {plugin} declares HOOK_DEADLINE_S = {raw!r:.40}, which is not a "
                      "number of seconds above 0; fix it in the plugin, or disable it "
                      f"(ORCH_DISABLE_PLUGINS={plugin})")
    return value, None
